#!/usr/bin/env python3
"""Runs every `joulepipe` command that README.md and docs/*.md show.

Docs that stay true: a command the documentation shows is a promise that
it runs as written. This script finds those commands in the fenced code
blocks and runs them, one document at a time, in order, in a fresh folder
where `build/` and `data/` and `examples/` are the repository's (so
`build/joulepipe plan --profile data/profiles/...` runs as a reader would
run it from the checkout), `joulepipe` is on PATH, and NVML is the
simulated library.

What is a command:
  * in a block with `$ ` prompts, each `$ ` line (what follows, up to the
    next prompt, is its shown output);
  * in other shell blocks, a line that starts `joulepipe`, `build/joulepipe`
    or `./build/joulepipe` followed by a command name or an option, then
    nothing, a flag, a comment or a placeholder (output lines such as
    `joulepipe serve: listening ...` or `joulepipe plan + floor ...` are not);
  * backslash continuations join; `# comments` are dropped.

What it checks:
  * a command whose shown output starts with `joulepipe: error:` fails
    (non-zero exit) and prints that error line (whitespace aside);
  * every other command exits 0 (or the `exit code N` its shown output
    says, as `measure` passes on its command's); a long-running one (`serve`, `power`)
    counts as running if it is still up after a few seconds;
  * a timing the docs state, marked beside it for this script as
      <!-- doc-timing: "SUBSTRING OF THE COMMAND" LOW..HIGH s -->
    (LOW on an idle machine, HIGH on a busy one), holds within 2x: the
    command's wall time (median of 3 when it takes under 10 s) lies in
    [LOW / 2, HIGH * 2].

What it cannot run it names, with the reason, and never silently: a
synopsis (`...`, `[--flag]`, `P.csv`-style placeholders), an input file
that is neither in the repository nor written by an earlier command of
the same document (error examples on hypothetical files), a path outside
the working folder, or a program after `--` that does not exist here
(`python train.py`). Each such command must be listed in NOT_RUNNABLE
below with its reason's class, so a new command that does not run fails
the check until someone decides whether the docs or the code are wrong.

Usage: check_doc_commands.py --source DIR --build DIR [--list]
"""

import argparse
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "demo", "plan", "evaluate", "simulate", "profile", "gpus", "measure", "power",
    "calibrate-wait", "serve", "site", "tune", "report",
}
LONG_RUNNING = {"serve", "power"}
# Options whose value is a file or folder the command reads.
INPUT_FLAGS = {"--profile", "--plan", "--wait-model", "--frontier", "--token-file",
               "--measure", "--join"}
SHELL_LANGS = {"", "sh", "bash", "shell", "console"}
TIMING_RE = re.compile(r'<!--\s*doc-timing:\s*"([^"]+)"\s*([0-9.]+)\.\.([0-9.]+)\s*s\b[^>]*-->')
PER_COMMAND_TIMEOUT_S = 600
LONG_RUNNING_GRACE_S = 4

# (document, the command as the docs show it, joined and without comments)
# -> why it is shown but not run. A command here that turns runnable, or one
# not here that cannot run, fails the check.
NOT_RUNNABLE_REASONS = {
    "synopsis": "a synopsis with placeholders, not a command to run",
    "hypothetical input": "an error example on a file the reader would have made",
    "outside": "writes or reads outside the working folder (system paths)",
    "program": "the program after -- is the reader's own",
    # Declared in not_runnable.tsv only (the checker cannot see it).
    "needs a GPU": "the program after -- runs CUDA kernels",
}
DECLARED_ONLY = {"needs a GPU"}


def not_runnable_reason(doc, argv, produced, workdir):
    """The class of reason this command cannot run here, or None."""
    words = argv[1:]
    if any(w == "..." or w.startswith("[") or w.endswith("]") or "|" == w or
           (w.startswith("<") and w.endswith(">")) for w in words):
        return "synopsis"
    if "--" in words:
        program = words[words.index("--") + 1:]
        if not program:
            return "synopsis"
        exe = program[0]
        if exe.isupper() or shutil.which(exe) is None:
            return "program"
        for w in program[1:]:
            if w.endswith(".py") and not os.path.exists(os.path.join(workdir, w)):
                return "program"
    for i, w in enumerate(words):
        value = None
        if w in INPUT_FLAGS and i + 1 < len(words):
            value = words[i + 1]
        elif "=" in w and w.split("=", 1)[0] in INPUT_FLAGS:
            value = w.split("=", 1)[1]
        if w.startswith("/") and not w.startswith("/dev/"):
            return "outside"
        if value is None:
            continue
        if value.startswith("/") and not value.startswith("/dev/"):
            return "outside"
        if re.fullmatch(r"[A-Z]+\.(csv|json)", os.path.basename(value)):
            return "synopsis"
        if not (os.path.exists(os.path.join(workdir, value)) or
                any(value.rstrip("/").startswith(p.rstrip("/")) for p in produced)):
            return "hypothetical input"
    return None


def parse_doc(path):
    """[(line, command text, shown output lines)] in document order."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    in_block, lang, block = False, "", []
    for number, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```(\S*)", line)
        if fence:
            if in_block:
                if lang in SHELL_LANGS:
                    out.extend(commands_in_block(block))
                block = []
            else:
                lang = fence.group(1)
            in_block = not in_block
            continue
        if in_block:
            block.append((number, line))
    return out


def is_command_line(text):
    words = text.split()
    if len(words) < 2 or words[0] not in ("joulepipe", "build/joulepipe", "./build/joulepipe"):
        return False
    if not (words[1] in COMMANDS or words[1].startswith("-")):
        return False
    # A command's next word is a flag, a comment or a placeholder; output
    # such as "joulepipe plan + floor 1.740 MW ..." is not a command.
    return len(words) == 2 or words[2].startswith(("-", "#", "[", "...", "<"))


def commands_in_block(block):
    prompted = any(line.lstrip().startswith("$ ") for _, line in block)
    found = []
    i = 0
    while i < len(block):
        number, line = block[i]
        text = line.strip()
        if prompted:
            if not text.startswith("$ "):
                i += 1
                continue
            text = text[2:].strip()
            if not text.split() or text.split()[0] not in ("joulepipe", "build/joulepipe",
                                                           "./build/joulepipe"):
                i += 1
                continue
        elif not is_command_line(text):
            i += 1
            continue
        while text.endswith("\\") and i + 1 < len(block):
            i += 1
            text = text[:-1].rstrip() + " " + block[i][1].strip()
        shown = []
        j = i + 1
        while prompted and j < len(block) and not block[j][1].lstrip().startswith("$ "):
            shown.append(block[j][1])
            j += 1
        found.append((number, text, shown))
        i += 1
    return found


def split_command(text):
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise SystemExit(f"cannot split the shown command {text!r}: {e}")


def outputs_of(argv):
    words = argv[1:]
    for i, w in enumerate(words):
        if w == "--out" and i + 1 < len(words):
            return [words[i + 1]]
        if w.startswith("--out="):
            return [w.split("=", 1)[1]]
    if words and words[0] == "demo":
        return ["joulepipe-demo"]
    return []


def run(argv, workdir, env, long_running):
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(
            timeout=LONG_RUNNING_GRACE_S if long_running else PER_COMMAND_TIMEOUT_S)
        return proc.returncode, out, err, time.monotonic() - started, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return None, out, err, time.monotonic() - started, True


def squash(text):
    return " ".join(text.split())


def check_doc(doc, rel, build, source, timings, env, failures, listing):
    commands = parse_doc(doc)
    if not commands:
        return 0, 0
    workdir = tempfile.mkdtemp(prefix="doc-commands-")
    ran = skipped = 0
    try:
        for name in ("build", "data", "examples"):
            os.symlink(build if name == "build" else os.path.join(source, name),
                       os.path.join(workdir, name))
        produced = []
        for number, text, shown in commands:
            argv = split_command(text)
            where = f"{rel}:{number}"
            reason = not_runnable_reason(rel, argv, produced, workdir)
            listed = NOT_RUNNABLE.get((rel, squash(" ".join(argv))))
            SEEN.add((rel, squash(" ".join(argv))))
            if listing:
                print(f"{rel}\t{reason or 'runs'}\t{squash(' '.join(argv))}")
                produced += outputs_of(argv)
                continue
            if reason is not None:
                skipped += 1
                if listed != reason:
                    failures.append(
                        f"{where}: `{' '.join(argv)}` cannot run here ({NOT_RUNNABLE_REASONS[reason]})"
                        + (f"; NOT_RUNNABLE says '{listed}'" if listed else
                           "; make it runnable, or add it to NOT_RUNNABLE with this reason"))
                continue
            if listed in DECLARED_ONLY:
                skipped += 1
                continue
            if listed is not None:
                failures.append(f"{where}: `{' '.join(argv)}` runs here, but NOT_RUNNABLE lists "
                                f"it as '{listed}': drop it from the list")
            outputs = outputs_of(argv)
            if argv[0] != "joulepipe":
                argv[0] = os.path.join(workdir, argv[0])
            else:
                argv[0] = os.path.join(build, "joulepipe")
            timing = next(((lo, hi) for sub, lo, hi in timings if sub in text), None)
            expect_error = next((squash(l) for l in shown if l.strip().startswith(
                "joulepipe: error:")), None)
            # `measure` ends with its command's exit code and shows it.
            shown_exit = next((int(m.group(1)) for l in shown
                               for m in [re.search(r"\bexit code (\d+)\b", l)] if m), 0)
            long_running = len(argv) > 1 and argv[1] in LONG_RUNNING
            rc, out, err, seconds, still_up = run(argv, workdir, env, long_running)
            times = [seconds]
            if timing and seconds < 10:
                for _ in range(2):
                    times.append(run(argv, workdir, env, long_running)[3])
            ran += 1
            produced += outputs
            tail = squash(err)[-600:]
            if expect_error is not None:
                if rc == 0 or still_up:
                    failures.append(f"{where}: `{text}` should fail with `{expect_error}`, "
                                    f"but it exited {rc}")
                elif expect_error not in squash(err):
                    failures.append(f"{where}: `{text}` failed, but not as shown:\n"
                                    f"    shown:   {expect_error}\n    printed: {tail}")
            elif still_up:
                if not long_running:
                    failures.append(f"{where}: `{text}` did not finish in "
                                    f"{PER_COMMAND_TIMEOUT_S} s")
            elif rc != shown_exit:
                failures.append(f"{where}: `{text}` exited {rc}"
                                + (f" (the docs show {shown_exit})" if shown_exit else "")
                                + f": {tail}")
            if timing:
                lo, hi = timing
                median = statistics.median(times)
                verdict = "ok" if lo / 2 <= median <= hi * 2 else "NOT within 2x"
                print(f"{where}: timing stated {lo:g}..{hi:g} s, took {median:.2f} s "
                      f"(median of {len(times)}): {verdict}")
                if verdict != "ok":
                    failures.append(f"{where}: the docs state {lo:g}..{hi:g} s for `{text}`; "
                                    f"it took {median:.2f} s (median of {len(times)})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return ran, skipped


NOT_RUNNABLE = {}
SEEN = set()  # the (document, command) pairs met


def load_not_runnable(path):
    """NOT_RUNNABLE's entries: lines `document<TAB>reason<TAB>command`."""
    table = {}
    for line in open(path, encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        doc, reason, command = line.rstrip("\n").split("\t")
        if reason not in NOT_RUNNABLE_REASONS:
            raise SystemExit(f"{path}: unknown reason '{reason}' for `{command}`")
        table[(doc, squash(command))] = reason
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="the repository's root")
    parser.add_argument("--build", required=True, help="the build folder (holds joulepipe)")
    parser.add_argument("--list", action="store_true",
                        help="print every command and its class (as not_runnable.tsv lines), "
                        "run nothing")
    parser.add_argument("--only", help="check only this document (e.g. README.md)")
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    build = os.path.abspath(args.build)
    global NOT_RUNNABLE
    NOT_RUNNABLE = load_not_runnable(os.path.join(source, "tests", "docs", "not_runnable.tsv"))
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(source, "docs"))
                                  if f.endswith(".md"))
    if args.only:
        docs = [d for d in docs if d == args.only]
    env = dict(os.environ)
    env["PATH"] = build + os.pathsep + env.get("PATH", "")
    env["JOULEPIPE_NVML_LIBRARY"] = os.path.join(build, "sim-nvml", "libnvidia-ml.so.1")
    failures = []
    total_ran = total_skipped = timed = 0
    for rel in docs:
        path = os.path.join(source, rel)
        text = open(path, encoding="utf-8").read()
        timings = [(m.group(1), float(m.group(2)), float(m.group(3)))
                   for m in TIMING_RE.finditer(text)]
        timed += len(timings)
        started = time.monotonic()
        ran, skipped = check_doc(path, rel, build, source, timings, env, failures, args.list)
        if ran or skipped:
            print(f"{rel}: {ran} commands run, {skipped} shown but not runnable "
                  f"({time.monotonic() - started:.1f} s)", flush=True)
        total_ran += ran
        total_skipped += skipped
    print(f"in all: {total_ran} commands run, {total_skipped} not runnable (listed), "
          f"{timed} stated timings")
    if not args.only:
        for doc, command in sorted(set(NOT_RUNNABLE) - SEEN):
            failures.append(f"not_runnable.tsv lists `{command}` in {doc}, which no longer shows "
                            "it: drop the line")
    if total_ran < 20 and not args.only:
        failures.append(f"only {total_ran} commands ran: the parser has lost the docs' commands")
    if failures:
        print("\n".join(["", "FAILED:"] + failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The hf-eager validation line that `site` and `tune` print holds.

`joulepipe site --framework hf-eager` prints, under its projection,
physics::FrameworkValidation(kHfEager): the same-time saving and iteration
time errors of the held-out Perseus Merak runs. This check runs
bench_fidelity (about 6 s) and recomputes those figures from its table, so
the line cannot outlive the model it describes (issue 44 found the Megatron
line doing that; WorkloadValidation.TheValidationLineThatProjectionsPrintHolds
covers that one).

Usage: check_hf_eager_line.py --cli build/joulepipe --bench build/bench_fidelity
"""

import argparse
import re
import subprocess
import sys

NUM = r"([+-]?[0-9.]+)"


def printed_line(cli):
    out = subprocess.run(
        [cli, "site", "--model", "gpt3-2.7b", "--gpu", "a40", "--gpus", "8", "--tp", "1",
         "--pp", "8", "--tokens", "1e9", "--framework", "hf-eager"],
        capture_output=True, text=True, timeout=300, check=True).stdout
    for line in out.splitlines():
        if "hf-eager validated against" in line:
            return line[line.index("hf-eager validated against"):]
    raise SystemExit("site --framework hf-eager printed no validation line:\n" + out)


def held_out_rows(bench):
    out = subprocess.run([bench], capture_output=True, text=True, timeout=600, check=True).stdout
    rows = []
    row = re.compile(r"^held-out\s+\S+\s+(\S+)\s+DP(\d+) TP(\d+) PP(\d+)\s+" + NUM + r" / " + NUM +
                     r"\s+" + NUM + r" / " + NUM)
    for line in out.splitlines():
        m = row.match(line)
        if m:
            name, dp, tp = m.group(1), int(m.group(2)), int(m.group(3))
            t_meas, t_pred, s_meas, s_pred = (float(m.group(i)) for i in range(5, 9))
            rows.append({"name": name, "pp_only": dp == 1 and tp == 1,
                         "saving_pp": s_pred - s_meas, "time_pct": 100 * (t_pred / t_meas - 1)})
    if len(rows) != 5:
        raise SystemExit(f"expected 5 held-out runs in bench_fidelity's table, read {len(rows)}:\n"
                         + out)
    # The table rounds to 0.1 s and 0.1 %; the per-half line has the errors
    # to 3-4 digits, in the table's order.
    m = re.search(r"^\s+held-out\s+saving (.*) pp; time (.*) %$", out, re.MULTILINE)
    if not m:
        raise SystemExit("bench_fidelity printed no per-half line for the held-out runs:\n" + out)
    savings = [float(x) for x in m.group(1).split(",")]
    times = [float(x) for x in m.group(2).split(",")]
    if len(savings) != len(rows) or len(times) != len(rows):
        raise SystemExit("the per-half line and the table disagree on the runs:\n" + m.group(0))
    for row, saving, time in zip(rows, savings, times):
        row["saving_pp"], row["time_pct"] = saving, time
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--bench", required=True)
    args = parser.parse_args()
    line = printed_line(args.cli)
    m = re.search(r"saving " + NUM + r"\.\." + NUM + r" pp and iteration time " + NUM + r"\.\." +
                  NUM + r" % on the held-out PP runs except T5 \(" + NUM + r" pp, " + NUM +
                  r" %.*3D run " + NUM + r" pp, " + NUM + r" % time", line)
    if not m:
        raise SystemExit("cannot read the figures of: " + line)
    claimed = [float(x) for x in m.groups()]
    rows = held_out_rows(args.bench)
    pp = [r for r in rows if r["pp_only"] and r["name"] != "t5-3b"]
    t5 = next(r for r in rows if r["name"] == "t5-3b")
    three_d = next(r for r in rows if not r["pp_only"])
    # The line's precision: one decimal, T5 and the 3D time to whole units.
    actual = [min(r["saving_pp"] for r in pp), max(r["saving_pp"] for r in pp),
              min(r["time_pct"] for r in pp), max(r["time_pct"] for r in pp),
              t5["saving_pp"], t5["time_pct"], three_d["saving_pp"], three_d["time_pct"]]
    slack = [0.06, 0.06, 0.06, 0.06, 0.6, 0.6, 0.06, 0.6]
    names = ["PP saving low", "PP saving high", "PP time low", "PP time high", "T5 saving",
             "T5 time", "3D saving", "3D time"]
    failures = [f"{n}: the line says {c:+g}, bench_fidelity gives {a:+.3f}"
                for n, c, a, s in zip(names, claimed, actual, slack) if abs(c - a) > s]
    print("line:", line)
    for n, c, a in zip(names, claimed, actual):
        print(f"  {n:15s} says {c:+7.2f}  is {a:+8.3f}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

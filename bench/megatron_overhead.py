"""Iteration time of the tiny-GPT Megatron example (megatron-core's own 1F1B
schedule, PP = 2, on the CPU with the simulated NVML library) without
joulepipe, with --joulepipe measure and with --joulepipe optimize (a plan
from `joulepipe plan`), measured in the same run: medians over the
iterations after warm-up, per rank, and their ratios to the run without.

    python3 bench/megatron_overhead.py [--iterations 40] [--rounds 3]

Runs are interleaved round by round (off, measure, optimize, off, ...) so
that a machine that slows down mid-run affects every mode alike.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("JOULEPIPE_BUILD_DIR", REPO / "build"))
EXAMPLE = REPO / "examples" / "megatron" / "train_tiny_gpt.py"
WARMUP = 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    sim = tmp / "sim.json"
    sim.write_text(json.dumps({"gpu": "a100-sxm4-80gb", "count": 2,
                               "permissions": {"clocks": True},
                               "load": [{"start_s": -1e9, "end_s": 1e9}]}))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               JOULEPIPE_SIM_NVML_CONFIG=str(sim),
               LD_LIBRARY_PATH=f"{BUILD / 'sim-nvml'}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=f"{BUILD / 'python'}:{os.environ.get('PYTHONPATH', '')}")
    cli = str(BUILD / "joulepipe")
    subprocess.run([cli, "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu", "a100-sxm",
                    "--tp", "1", "--pp", "2", "--out", str(tmp / "p.csv")], check=True,
                   capture_output=True, timeout=60)
    subprocess.run([cli, "plan", "--profile", str(tmp / "p.csv"), "--schedule", "1f1b",
                    "--stages", "2", "--microbatches", "4", "--out", str(tmp / "plan")],
                   check=True, capture_output=True, timeout=120)
    modes = {"off": ["--joulepipe", "off"], "measure": ["--joulepipe", "measure"],
             "optimize": ["--joulepipe", "optimize", "--joulepipe-plan", str(tmp / "plan")]}
    runner = shutil.which("torchrun")
    times = {m: [] for m in modes}
    for r in range(args.rounds):
        for mode, flags in modes.items():
            log = tmp / f"{mode}-{r}.jsonl"
            cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
                "--standalone", "--nproc-per-node", "2", str(EXAMPLE), "--pp", "2",
                "--iterations", str(args.iterations), "--timeout-s", "60",
                "--log-json", str(log), *flags]
            subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
            for line in log.read_text().splitlines():
                rec = json.loads(line)
                if rec.get("kind") == "train" and rec["iteration"] > WARMUP:
                    times[mode].append(rec["time_s"])
            print(f"round {r + 1}/{args.rounds}: {mode} done", file=sys.stderr, flush=True)
    base = statistics.median(times["off"])
    print(f"tiny GPT, megatron-core 1F1B, PP 2, 4 microbatches, CPU + simulated NVML; "
          f"{args.rounds} rounds x {args.iterations - WARMUP} iterations x 2 ranks per mode")
    print(f"{'mode':10s} {'median ms':>10s} {'p90 ms':>8s} {'ratio':>7s} {'n':>5s}")
    for mode, t in times.items():
        t = sorted(t)
        med = statistics.median(t)
        print(f"{mode:10s} {med * 1e3:10.2f} {t[int(0.9 * (len(t) - 1))] * 1e3:8.2f} "
              f"{med / base:7.3f} {len(t):5d}")


if __name__ == "__main__":
    main()

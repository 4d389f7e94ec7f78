"""Embedded coordination on 4 ranks (PP 2 x DP 2, the tiny GPT on
megatron-core, CPU + simulated NVML with emulated kernels): pipeline 1 is
slowed in iterations [FROM, FROM + FOR); the same job runs with
--joulepipe measure (all clocks at default) and --joulepipe optimize
(embedded, the simulated gpt3-1.3b profile), interleaved over rounds.

Prints, per iteration, the plan version each rank ran and the job's GPU
energy (the simulated counter, 4 GPUs) in both runs; the iterations where
plans switched; the energy per iteration healthy and during the straggler;
the call log's clocks per rank; and the training thread's coordination cost.

    python3 bench/embedded_straggler.py [--iterations 40] [--rounds 2]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("JOULEPIPE_BUILD_DIR", REPO / "build"))
EXAMPLE = REPO / "examples" / "megatron" / "train_tiny_gpt.py"
FROM, FOR, SLOW_MS, KERNEL_MS = 12, 12, 60, 10


def run(tmp, mode, iterations, extra, tag):
    sim = tmp / f"sim-{tag}.json"
    calls = tmp / f"calls-{tag}.jsonl"
    sim.write_text(json.dumps({"gpu": "a100-sxm4-80gb", "count": 4, "power_reading": "instant",
                               "permissions": {"clocks": True}, "call_log": str(calls),
                               "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0,
                                         "compute_fraction": 0.8}]}))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               JOULEPIPE_SIM_NVML_CONFIG=str(sim),
               LD_LIBRARY_PATH=f"{BUILD / 'sim-nvml'}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=f"{BUILD / 'python'}:{os.environ.get('PYTHONPATH', '')}")
    runner = shutil.which("torchrun")
    log = tmp / f"energy-{tag}-{{rank}}.jsonl"
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "4", str(EXAMPLE), "--pp", "2", "--timeout-s", "60",
        "--iterations", str(iterations), "--emulate-kernel-ms", str(KERNEL_MS),
        "--slow-pipeline", "1", "--slow-from", str(FROM), "--slow-for", str(FOR),
        "--slow-ms", str(SLOW_MS), "--joulepipe", mode, "--joulepipe-log", str(log), *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    rows = {}
    for rank in range(4):
        path = Path(str(log).replace("{rank}", str(rank)))
        rows[rank] = [json.loads(l) for l in path.read_text().splitlines()]
    waits = re.findall(r"\[rank (\d)\] joulepipe \[rank \d\]: coordination took (\d+) us of the "
                       r"training thread per iteration \(median; max ([0-9.]+) ms", proc.stdout)
    set_calls = [json.loads(l) for l in calls.read_text().splitlines()] if calls.exists() else []
    reasons = re.findall(r"^\[rank 0\] joulepipe \[rank 0\]: plan v(\d+) applied .*?MHz[^;]*; (.*)$",
                         proc.stdout, re.M)
    return rows, waits, set_calls, reasons


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    profile = tmp / "p2.csv"
    subprocess.run([str(BUILD / "joulepipe"), "profile", "--simulate", "--model", "gpt3-1.3b",
                    "--gpu", "a100-sxm", "--tp", "1", "--pp", "2", "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    # Iteration numbers in the logs count from 0; the example's --slow-from
    # counts from 1: slowed iterations are FROM-1 .. FROM+FOR-2 here.
    slow = set(range(FROM - 1, FROM + FOR - 1))
    energy = {"measure": [], "optimize": []}
    for r in range(args.rounds):
        for mode, extra in (("measure", []), ("optimize", ["--joulepipe-profile", str(profile)])):
            rows, waits, calls, reasons = run(tmp, mode, args.iterations, extra, f"{mode}{r}")
            per_iteration = [sum(rows[k][i]["energy_j"] for k in range(4))
                             for i in range(args.iterations)]
            energy[mode].append(per_iteration)
            if mode == "optimize" and r == 0:
                versions = [[rows[k][i]["plan_version"] for k in range(4)]
                            for i in range(args.iterations)]
                print("iteration  plan version per rank (0..3)  job energy J: measure  optimize")
                for i in range(args.iterations):
                    flag = " straggler" if i in slow else ""
                    print(f"{i:9d}  {str(versions[i]):28s}  {energy['measure'][0][i]:15.2f}  "
                          f"{per_iteration[i]:8.2f}{flag}")
                switches = [(i, versions[i]) for i in range(1, args.iterations)
                            if versions[i] != versions[i - 1]]
                print("plan changes (iteration, versions):", switches)
                for version, reason in reasons:
                    print(f"rank 0 applied plan v{version}: {reason}")
                for k in range(4):
                    sets = [c["args"]["max_mhz"] for c in calls
                            if c["device"] == k and c["function"] == "nvmlDeviceSetGpuLockedClocks"]
                    print(f"rank {k}: {len(sets)} clock changes, clocks used "
                          f"{sorted(set(sets))}, last 8: {sets[-8:]}")
                for rank, med, mx in waits:
                    print(f"rank {rank}: coordination on the training thread: median {med} us, "
                          f"max {mx} ms per iteration")
    skip = 4  # warm-up and profiling-free start
    for phase, keep in (("healthy", lambda i: i >= skip and i not in slow
                         and i not in range(FROM + FOR - 1, FROM + FOR + 3)),
                        ("straggler", lambda i: i in slow and i >= FROM + 2)):
        # Means, not medians: an iteration (~0.3 s) spans 3 or 4 updates of
        # the 100 ms energy counter, so single iterations are quantised, but
        # the ticks telescope over a phase.
        mean = {m: statistics.fmean(e[i] for e in energy[m] for i in range(args.iterations)
                                    if keep(i)) for m in energy}
        print(f"{phase:9s}: mean job energy per iteration  measure {mean['measure']:.2f} J  "
              f"optimize {mean['optimize']:.2f} J  saving {1 - mean['optimize'] / mean['measure']:.1%}")


if __name__ == "__main__":
    main()

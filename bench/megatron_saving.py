"""The saving a plan predicts against the saving it measures (issue 58's
acceptance): the tiny GPT on megatron-core, 1F1B over two CPU ranks, each
forward and backward an emulated kernel on its simulated GPU
(--emulate-kernel-ms; the host waits for each, so the two devices keep the
pipeline's order), the last stage's heavier (--emulate-last-stage-ms, as a
stage with the output layer and the loss), so the first stage waits. The job profiles itself in situ, `joulepipe plan` plans
that profile, and the same job then runs with --joulepipe measure (default
clocks) and --joulepipe optimize (the plan), alternated over rounds.

Prints the plan's predicted saving and iteration time, then per round and
in median: the job's iteration time (the slower rank's) and GPU energy (both
ranks, from each rank's iteration log) in both modes, the measured saving
and its distance from the prediction (goal: within 3 percentage points),
and optimize's iteration time against measure's (goal: within 1 %).

    python3 bench/megatron_saving.py [--iterations 20] [--rounds 3] [--kernel-ms 10]
                                     [--last-stage-ms 14]
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
WARMUP = 2  # iterations left out of each run's medians


def torchrun(tmp, tag, args, kernels):
    sim = tmp / f"sim-{tag}.json"
    sim.write_text(json.dumps({"gpu": "a100-sxm4-80gb", "count": 2, "power_reading": "instant",
                               "permissions": {"clocks": True}}))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               JOULEPIPE_SIM_NVML_CONFIG=str(sim),
               LD_LIBRARY_PATH=f"{BUILD / 'sim-nvml'}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=f"{BUILD / 'python'}:{os.environ.get('PYTHONPATH', '')}")
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", str(EXAMPLE), "--pp", "2", "--timeout-s", "60",
        "--emulate-kernel-ms", str(kernels[0]), "--emulate-last-stage-ms", str(kernels[1]),
        *map(str, args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp)
    if proc.returncode != 0:
        sys.exit(f"{tag} failed:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc.stdout


def job_iterations(log):
    """[(time_s, energy_j)] per iteration of the job: the slower rank's time
    and both ranks' energy, from each rank's iteration log."""
    ranks = [[json.loads(l) for l in Path(str(log).replace("{rank}", str(r))).read_text()
              .splitlines() if json.loads(l).get("kind") == "iteration"] for r in (0, 1)]
    out = []
    for a, b in zip(*ranks):
        assert a["iteration"] == b["iteration"]
        if a["energy_j"] is None or b["energy_j"] is None:
            sys.exit(f"iteration {a['iteration']}: no energy measured")
        out.append((max(a["time_s"], b["time_s"]), a["energy_j"] + b["energy_j"]))
    return out[WARMUP:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kernel-ms", type=float, default=10,
                        help="a forward's emulated kernel at the highest clock (backward: 2x)")
    parser.add_argument("--last-stage-ms", type=float, default=14,
                        help="the last stage's forward kernel (its backward: 2x)")
    args = parser.parse_args()
    kernels = (args.kernel_ms, args.last_stage_ms)
    tmp = Path(tempfile.mkdtemp())

    profile = tmp / "profile.csv"
    out = torchrun(tmp, "profile", ["--iterations", 40, "--joulepipe", "profile",
                                    "--joulepipe-profile-out", profile,
                                    "--joulepipe-profile-stride-mhz", 90], kernels)
    if not profile.exists():
        sys.exit("the profile run wrote no profile:\n" + out[-3000:])
    planned = subprocess.run([str(BUILD / "joulepipe"), "plan", "--profile", str(profile),
                              "--schedule", "1f1b", "--stages", "2", "--microbatches", "4",
                              "--out", str(tmp / "plan")], capture_output=True, text=True,
                             timeout=300)
    if planned.returncode != 0:
        sys.exit("plan failed:\n" + planned.stderr)
    summary = json.loads((tmp / "plan" / "summary.json").read_text())
    base, chosen = summary["baseline"], summary["chosen"]
    predicted = 1 - chosen["energy_j"] / base["energy_j"]
    print(f"plan (from the job's own profile): predicted saving {predicted * 100:.2f} % of GPU "
          f"energy, iteration time {(chosen['time_s'] / base['time_s'] - 1) * 100:+.2f} %")

    times = {"measure": [], "optimize": []}
    energies = {"measure": [], "optimize": []}
    for r in range(args.rounds):
        for mode, extra in (("measure", []), ("optimize", ["--joulepipe-plan", tmp / "plan"])):
            log = tmp / f"{mode}-{r}-{{rank}}.jsonl"
            torchrun(tmp, f"{mode}-{r}", ["--iterations", args.iterations, "--joulepipe", mode,
                                          "--joulepipe-log", log, *extra], kernels)
            rows = job_iterations(log)
            times[mode].append(statistics.median(t for t, _ in rows))
            energies[mode].append(statistics.median(e for _, e in rows))
        saving = 1 - energies["optimize"][-1] / energies["measure"][-1]
        print(f"round {r + 1}: measure {times['measure'][-1] * 1e3:.1f} ms "
              f"{energies['measure'][-1]:.2f} J | optimize {times['optimize'][-1] * 1e3:.1f} ms "
              f"{energies['optimize'][-1]:.2f} J | saving {saving * 100:.2f} %")
    t_m, t_o = statistics.median(times["measure"]), statistics.median(times["optimize"])
    e_m, e_o = statistics.median(energies["measure"]), statistics.median(energies["optimize"])
    measured = 1 - e_o / e_m
    print(f"median of {args.rounds} rounds ({args.iterations - WARMUP} iterations each): "
          f"measured saving {measured * 100:.2f} % against {predicted * 100:.2f} % predicted "
          f"({(measured - predicted) * 100:+.2f} pp; goal within 3 pp); iteration time "
          f"{(t_o / t_m - 1) * 100:+.2f} % against measure (goal within 1 %)")


if __name__ == "__main__":
    main()

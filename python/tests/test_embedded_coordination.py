"""Embedded coordination on 4 ranks (PP = 2 x DP = 2, the tiny GPT on
megatron-core 0.16.1, CPU, simulated NVML): no service runs anywhere.

* profile -> plan -> optimize: the ranks profile in situ, rank 0 plans over
  the side group, every rank runs its plan's clocks (the call log);
* one pipeline slowed for a few iterations: the other pipeline's ranks get
  the straggler plan, then the initial plan back after recovery;
* rank 0's planner fails: one line per rank, default clocks everywhere,
  training completes;
* the training thread's coordination cost per iteration, as each rank logs it.

The example's forwards and backwards also sleep as long as a compute-bound
kernel would at the simulated clock (--emulate-kernel-ms, CPU only), so step
times respond to clocks and four ranks sharing two cores time them well.
Every torchrun has a timeout, gloo its own.
"""

import json
import re
import shutil
import subprocess
import sys

import pytest

from build_paths import CLI, REPO, package_built, python_env

if not package_built():
    pytest.skip("joulepipe._core not built", allow_module_level=True)
pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")
pytest.importorskip("megatron.core", reason="megatron-core is not installed (scripts/install-deps)")
pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (scripts/install-deps)")

EXAMPLE = REPO / "examples" / "megatron" / "train_tiny_gpt.py"
SIM = {"gpu": "a100-sxm4-80gb", "count": 4, "power_reading": "instant",
       "permissions": {"clocks": True},
       "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0, "compute_fraction": 0.8}]}
# Global rank -> (pp_rank, dp_rank) of megatron's default order.
PLACE = {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}
APPLIED = re.compile(r"^\[rank (\d)\] joulepipe \[rank \d\]: plan v(\d+) applied to stage (\d) "
                     r"through \w+: (.*) MHz(?: \(.*\))?; (.*)$")


def run(tmp_path, *args, iterations=30, timeout=420):
    cfg = tmp_path / "sim-nvml.json"
    cfg.write_text(json.dumps(dict(SIM, call_log=str(tmp_path / "calls.jsonl"))))
    env = python_env(cfg)
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "4", str(EXAMPLE), "--pp", "2", "--timeout-s", "60",
        "--iterations", str(iterations), "--emulate-kernel-ms", "10", "--joulepipe", "optimize",
        *map(str, args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for rank in range(4):  # training completed on every rank
        assert f"[rank {rank}] joulepipe: iteration {iterations - 1} |" in out, out[-6000:]
    return out


def applied(out):
    """Per rank: [(version, clocks, reason)] of every plan it applied."""
    plans = {r: [] for r in range(4)}
    for line in out.splitlines():
        m = APPLIED.match(line)
        if m:
            rank, version, stage = int(m[1]), int(m[2]), int(m[3])
            assert stage == PLACE[rank][0]
            clocks = [int(c.split("@")[1]) for c in m[4].split()]
            plans[rank].append((version, clocks, m[5]))
    return plans


def locked(tmp_path, device):
    path = tmp_path / "calls.jsonl"
    calls = [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
    return [c for c in calls if c["device"] == device]


def coordination_waits(out):
    """Per rank: (median us, max ms) of the training thread's coordination."""
    found = re.findall(r"\[rank (\d)\] joulepipe \[rank \d\]: coordination took (\d+) us of the "
                       r"training thread per iteration \(median; max ([0-9.]+) ms", out)
    return {int(r): (int(med), float(mx)) for r, med, mx in found}


def simulated_profile(tmp_path, stages):
    path = tmp_path / f"p{stages}.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", str(stages), "--out", str(path)],
                   check=True, capture_output=True, timeout=60)
    return path


def test_profile_plan_optimize_with_no_service(tmp_path):
    out = run(tmp_path, "--joulepipe-profile-stride-mhz", "135")
    assert "[rank 0] joulepipe [rank 0]: planning 1f1b, 2 stages x 4 microbatches, dp 2, tp 1 " \
           "(embedded, on rank 0)" in out, out[-6000:]
    assert "training goes on" not in out, out[-6000:]  # nobody fell back
    plans = applied(out)
    for rank in range(4):
        assert plans[rank] and plans[rank][0][0] == 1, (rank, out[-6000:])
        # The rank's GPU ran its plans' clocks, the newest until the end, then
        # default clocks (the profiling sweep came first).
        calls = locked(tmp_path, rank)
        assert calls[-1]["function"] == "nvmlDeviceResetGpuLockedClocks"
        sets = [c["args"]["max_mhz"] for c in calls
                if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
        assert set(plans[rank][0][1]) <= set(sets), (rank, plans[rank][0], sets)
        # (A plan taken at the last boundaries may never have run a step.)
        planned = {f for _, clocks, _ in plans[rank] for f in clocks}
        assert sets[-1] in planned, (rank, plans[rank], sets[-8:])
    waits = coordination_waits(out)
    assert sorted(waits) == [0, 1, 2, 3], out[-3000:]
    # Never a wait on another rank: far below one iteration (~0.3 s).
    assert all(mx < 50 for _, mx in waits.values()), waits


def test_a_straggler_moves_the_other_pipeline_and_recovery_moves_it_back(tmp_path):
    profile = simulated_profile(tmp_path, 2)
    # 60 ms more per forward: pipeline 1 at about 1.5x while it lasts, far
    # beyond what a CPU shared by four ranks adds as noise.
    out = run(tmp_path, "--joulepipe-profile", profile, "--slow-pipeline", "1",
              "--slow-from", "8", "--slow-for", "10", "--slow-ms", "60", iterations=40)
    plans = applied(out)
    for rank in (0, 2):  # pipeline 0, the one that is on time
        reasons = [reason for _, _, reason in plans[rank]]
        straggler = [i for i, r in enumerate(reasons) if "straggler: pipeline 1" in r]
        assert straggler, (rank, reasons)
        recovered = [i for i, r in enumerate(reasons) if "recovered" in r and i > straggler[0]]
        assert recovered, (rank, reasons)
        # The straggler plan's clocks ran on this rank's GPU.
        slow_clocks = set(plans[rank][straggler[0]][1])
        seen = {c["args"]["max_mhz"] for c in locked(tmp_path, rank)
                if c["function"] == "nvmlDeviceSetGpuLockedClocks"}
        assert slow_clocks <= seen, (rank, slow_clocks, seen)
        # ... and less energy: the straggler plan is slower and cheaper.
        assert plans[rank][straggler[0]][1] != plans[rank][0][1]


def test_planner_failure_leaves_default_clocks_and_training_completes(tmp_path):
    wrong = simulated_profile(tmp_path, 1)  # a profile of 1 stage for a 2-stage job
    out = run(tmp_path, "--joulepipe-profile", wrong, iterations=12)
    assert "[rank 0] joulepipe [rank 0]: planning failed:" in out, out[-6000:]
    for rank in range(4):
        lines = [l for l in out.splitlines()
                 if l.startswith(f"[rank {rank}] joulepipe [rank {rank}]: ")
                 and "training goes on" in l]
        assert len(lines) == 1 and "planning failed" in lines[0], (rank, lines)
        assert not any(c["function"] == "nvmlDeviceSetGpuLockedClocks"
                       for c in locked(tmp_path, rank))
    assert applied(out) == {r: [] for r in range(4)}

"""Where the GPU is, under megatron-core (issue 58, item 3): the interleaved
1F1B schedule with overlap_p2p_comm (Megatron-LM's
--overlap-p2p-communication, so no batch_p2p_sync) on two CPU ranks, each
forward and backward queueing an emulated kernel on its simulated GPU's
stream without waiting for it (examples/megatron: --emulate-run-ahead), so
the host runs ahead of the device until the optimizer step. Given the
stream, profile rows are the device's and every kernel runs under its
planned clock; at the host's points (--emulate-host-points) neither holds,
so these tests can fail. The simulated library logs each kernel's device
times, clocks and exact energy: the ground truth.

Every torchrun has a timeout and gloo its own (--timeout-s)."""

import json
import shutil
import statistics
import subprocess
import sys

import pytest

from build_paths import CLI, REPO, package_built, python_env
from sim_gpu import kernel_clocks

if not package_built():
    pytest.skip("joulepipe._core not built (cmake --build build)", allow_module_level=True)
pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")
pytest.importorskip("megatron.core", reason="megatron-core is not installed "
                                            "(scripts/install-deps installs 0.16.1)")

EXAMPLE = REPO / "examples" / "megatron" / "train_tiny_gpt.py"
# No constant load: between kernels the simulated GPUs idle.
SIM = {"gpu": "a100-sxm4-80gb", "count": 2, "power_reading": "instant",
       "energy_update_period_ms": 100, "permissions": {"clocks": True}}
KERNEL_MS = 10  # a forward's kernel at the highest clock (a backward's: twice)
SHAPE = ["--pp", "2", "--vp", "2", "--microbatches", "4", "--overlap-p2p-comm",
         "--emulate-kernel-ms", str(KERNEL_MS), "--emulate-run-ahead"]


def run(tmp_path, *args, timeout=300):
    config = tmp_path / "sim-nvml.json"
    config.write_text(json.dumps(dict(SIM, call_log=str(tmp_path / "calls.jsonl"))))
    env = python_env(config)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", str(EXAMPLE), "--timeout-s", "60", *SHAPE,
        *map(str, args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def calls(tmp_path):
    path = tmp_path / "calls.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def kernels(log, device):
    """The device's kernels in the order it ran them."""
    return sorted((c["args"] for c in log if c["function"] == "kernel" and c["device"] == device),
                  key=lambda a: a["start_unix_s"])


def kind_of(kernel):
    return "forward" if kernel["seconds_at_max_clock"] < 1.5 * KERNEL_MS / 1e3 else "backward"


def truth(log, device):
    """Median device time and exact energy per (kind, clock) of the device's
    kernels that ran wholly at one clock. The median, as the profiler's rows
    are trimmed means: a kernel the simulated device overslept (a loaded
    machine) moves a mean, and one such read a row 9 % off the mean."""
    seen = {}
    for k in kernels(log, device):
        if round(k["start_mhz"]) != round(k["end_mhz"]):
            continue
        key = (kind_of(k), round(k["start_mhz"]))
        seen.setdefault(key, []).append((k["end_unix_s"] - k["start_unix_s"], k["energy_j"]))
    return {key: (statistics.median(t for t, _ in v), statistics.median(e for _, e in v))
            for key, v in seen.items()}


def rows_of(path):
    """(stage, kind, clock, time, energy) of a profile CSV's rows."""
    lines = [l for l in path.read_text().splitlines() if l and not l.startswith("#")]
    return [(int(s), k, int(f), float(t), float(e))
            for s, k, f, t, e, *_ in (l.split(",") for l in lines[1:])]


@pytest.mark.parametrize("where", ["stream", "host"])
def test_profile_rows_are_the_devices_under_interleaved_overlap(tmp_path, where):
    profile = tmp_path / "profile.csv"
    out = run(tmp_path, "--iterations", "16", "--joulepipe", "profile",
              "--joulepipe-profile-out", profile, "--joulepipe-profile-stride-mhz", "270",
              *(["--emulate-host-points"] if where == "host" else []))
    log = calls(tmp_path)
    if where == "host":
        # The rows are how long the host took to enqueue an instruction:
        # far under the device's time, or no profile at all.
        assert "host's hook points" in out, out
        if profile.exists():
            shortest = min(t for d in (0, 1) for t, _ in truth(log, d).values())
            assert all(t < 0.5 * shortest for _, _, _, t, _ in rows_of(profile)), out
        return
    assert "where the GPU is" in out, out
    rows = rows_of(profile)
    assert {s for s, *_ in rows} == {0, 1} and len(rows) >= 8, rows
    for stage, kind, mhz, t, e in rows:
        real = truth(log, stage)
        near = min((k for k in real if k[0] == kind), key=lambda k: abs(k[1] - mhz))
        true_t, true_e = real[near]
        # 0.6 % worst on an idle machine; beside two busy processes the
        # simulated device's own kernels vary (it oversleeps): 5 %.
        assert abs(t / true_t - 1) <= 0.05, (stage, kind, mhz, t, real)
        assert abs(e / true_e - 1) <= 0.05, (stage, kind, mhz, e, real)


@pytest.mark.parametrize("where", ["stream", "host"])
def test_every_kernel_runs_under_its_planned_clock_under_interleaved_overlap(tmp_path, where):
    profile = tmp_path / "p2.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", "2", "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    subprocess.run([str(CLI), "plan", "--profile", str(profile), "--stages", "2",
                    "--microbatches", "4", "--schedule", "interleaved", "--chunks", "2",
                    "--out", str(tmp_path / "plan")], check=True, capture_output=True,
                   timeout=120)
    chosen = json.loads((tmp_path / "plan" / "chosen.json").read_text())
    iterations = 4
    out = run(tmp_path, "--iterations", str(iterations), "--joulepipe", "optimize",
              "--joulepipe-plan", tmp_path / "plan",
              *(["--emulate-host-points"] if where == "host" else []))
    assert out.count("applied to stage") == 2, out
    log = calls(tmp_path)
    for stage in (0, 1):
        planned = [i["frequency"] for i in chosen["stages"][stage]] * iterations
        got = kernel_clocks(log, stage)
        assert len(got) == len(planned), (stage, len(got), len(planned))
        right = sum(g == p for g, p in zip(got, planned))
        if where == "stream":
            assert right == len(planned), (stage, got, planned)
        else:
            # At the host's points a clock is set when the host reaches an
            # instruction, far ahead of the device: most kernels run under
            # another instruction's clock.
            assert right < 0.75 * len(planned), (stage, right, len(planned))

"""One simulated A100 under full load with an NVML call log: the GPU the
clock tests run their child processes on (docs/sim-nvml.md)."""

import json
import subprocess
import sys

from build_paths import python_env

SIM = {"gpu": "a100-sxm4-80gb", "count": 1, "power_reading": "instant",
       "energy_update_period_ms": 100, "permissions": {"clocks": True},
       "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0, "compute_fraction": 0.8}]}


def write_config(tmp_path):
    """The simulated library's config in tmp_path, logging every NVML call to
    tmp_path/calls.jsonl; returns its path."""
    config = tmp_path / "sim.json"
    config.write_text(json.dumps(dict(SIM, call_log=str(tmp_path / "calls.jsonl"))))
    return config


def calls(tmp_path):
    """The NVML calls logged so far, oldest first ([] when none was made)."""
    path = tmp_path / "calls.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


# The child side: a loop of joulepipe.pytorch without torch (an import of
# torch costs ten seconds here, a step a few milliseconds); step(energy)
# runs one training step of two microbatches and waits until the clock
# agent applied what the step asked for.
STEP = """
import sys, time
sys.modules["torch"] = None
import joulepipe.pytorch as jp

def step(energy, forward_s=0.004, backward_s=0.006):
    with energy.step():
        for mb in range(2):
            with energy.forward(mb):
                time.sleep(forward_s)
            with energy.backward(mb):
                time.sleep(backward_s)
        energy.pipeline_done()
        energy._session._agent.wait_idle()
"""


def kernel_clocks(log, device=None):
    """Per kernel the simulated library ran (of `device`, else of every
    device), in device order: the clock locked over its second half (0:
    default clocks), from the call log's clock calls and kernel records."""
    mine = [c for c in log if device is None or c["device"] == device]
    sets = [(c["t"], c["args"]["max_mhz"] if c["function"] == "nvmlDeviceSetGpuLockedClocks"
             else 0) for c in mine
            if c["function"] in ("nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks")]
    out = []
    for k in sorted((c["args"] for c in mine if c["function"] == "kernel"),
                    key=lambda a: a["start_unix_s"]):
        middle = (k["start_unix_s"] + k["end_unix_s"]) / 2
        in_force = [m for t, m in sets if t <= middle]
        out.append(in_force[-1] if in_force else 0)
    return out


def run_child(tmp_path, body, *args, timeout=60):
    """STEP, then `body`, in a fresh Python on the simulated GPU (calls logged
    to tmp_path/calls.jsonl); sys.argv[1:] are `args`."""
    return subprocess.run([sys.executable, "-c", STEP + body, *map(str, args)],
                          env=python_env(write_config(tmp_path)), capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)

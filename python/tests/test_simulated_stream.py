"""joulepipe._core.SimulatedStream: emulated kernels on the simulated GPU
(docs/sim-nvml.md, "A GPU that runs asynchronously"). The host returns from
a launch at once; the kernel's compute share runs at the clock in force
while it runs; the GPU's power follows the kernel, not a constant."""

import json

import pytest

from build_paths import package_built
from sim_gpu import calls, run_child

if not package_built():
    pytest.skip("joulepipe._core not built (cmake --build build)", allow_module_level=True)

CHILD = """
import json, time
from joulepipe import _core
s = _core.SimulatedStream(0)
t0 = time.perf_counter(); s.launch(0.05); enqueue = time.perf_counter() - t0
s.synchronize(); full = time.perf_counter() - t0
print(json.dumps({"enqueue": enqueue, "full": full}))
"""


def test_a_launch_returns_at_once_and_the_kernel_runs_on_the_device(tmp_path):
    r = run_child(tmp_path, CHILD)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout.splitlines()[-1])
    assert figures["enqueue"] < 0.025, figures  # 50 ms of device work, queued
    assert figures["full"] >= 0.049, figures
    kernels = [c for c in calls(tmp_path) if c["function"] == "kernel"]
    assert len(kernels) == 1
    k = kernels[0]["args"]
    # At full activity the simulated A100 is held below 1410 MHz by its 400 W
    # limit: the kernel ran at that clock, its compute share that much longer.
    assert 0 < k["start_mhz"] <= 1410, k
    assert k["end_unix_s"] - k["start_unix_s"] >= 0.05 * 1410 / k["start_mhz"] * 0.99, k


def test_bad_devices_and_kernels_are_refused_by_name(tmp_path):
    r = run_child(tmp_path, """
from joulepipe import _core
for make in (lambda: _core.SimulatedStream(7), lambda: _core.SimulatedStream(0).launch(0),
             lambda: _core.SimulatedStream(0).launch(0.01, compute_fraction=2)):
    try:
        make()
    except Exception as error:
        print(type(error).__name__, "|", error)
""")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(l.startswith("GpuError |") for l in lines), lines
    assert "at most 3600 s at the highest clock (got 0 s)" in lines[1], lines
    assert "compute_fraction is a share in [0, 1] (got 2)" in lines[2], lines

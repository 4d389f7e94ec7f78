"""Clocks where the GPU is, from Python (issue 58): a custom loop that queues
each step's kernels on the simulated GPU's stream without waiting (as a
real loop does until it reads its loss) runs a plan with jp.Energy. Given
the stream (stream=, as PyTorch's current stream is taken on a GPU), every
kernel runs under its planned clock; at the host's points, almost none
does. The call log says which clock each kernel ran under."""

import json

import pytest

from build_paths import package_built
from sim_gpu import calls, kernel_clocks, run_child

if not package_built():
    pytest.skip("joulepipe._core not built (cmake --build build)", allow_module_level=True)

# One stage, 2 microbatches, 1F1B: F0 B0 F1 B1 at 1005, 900, 1110, 855 MHz.
CLOCKS = [1005, 900, 1110, 855]
ORDER = [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]
PLAN = {"version": 1, "schedule": "1f1b", "num_stages": 1, "num_microbatches": 2,
        "num_chunks": 1,
        "stages": [[{"instruction": k, "microbatch": m, "chunk": 0, "frequency": f}
                    for (k, m), f in zip(ORDER, CLOCKS)]]}

CHILD = """
import sys
from joulepipe import _core
follow = sys.argv[2] == "stream"
gpu = _core.SimulatedStream(0)
options = {"stream": gpu.handle} if follow else {}
energy = jp.Energy("optimize", plan=sys.argv[1], microbatches=2, **options)
for _ in range(3):
    with energy.step():
        for mb in range(2):
            with energy.forward(mb):
                gpu.launch(0.015)  # returns at once: the host runs ahead
            with energy.backward(mb):
                gpu.launch(0.015)
        energy.pipeline_done()
        gpu.synchronize()  # the loss read
energy._session._agent.wait_idle()
energy.close()
"""


@pytest.mark.parametrize("mode", ["stream", "host"])
def test_clocks_land_on_their_kernels_only_with_the_stream(tmp_path, mode):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    r = run_child(tmp_path, CHILD, plan, mode)
    assert r.returncode == 0, r.stderr
    ran = kernel_clocks(calls(tmp_path))
    assert len(ran) == 12, ran
    right = sum(1 for k, mhz in enumerate(ran) if mhz == CLOCKS[k % 4])
    assert "cannot use the plan" not in r.stderr, r.stderr
    if mode == "stream":
        assert right == 12, ran
        assert "clocks follow the GPU" in r.stderr, r.stderr
    else:
        assert right <= 6, ran
        assert "clocks change at the host's hook points" in r.stderr, r.stderr


PROFILE_CHILD = """
import sys
from joulepipe import _core
follow = sys.argv[2] == "stream"
waits = sys.argv[2] == "host-waits"  # the host waits for each kernel
gpu = _core.SimulatedStream(0)
options = {"stream": gpu.handle} if follow else {}
energy = jp.Energy("profile", profile_out=sys.argv[1], microbatches=2, profile_stride_mhz=200,
                   **options)
for _ in range(30):
    if follow:
        # The previous step's tail (its optimizer, say): the device is busy
        # while the host starts the step, so a host descheduled for a few
        # ms on a loaded machine never leaves the device idle inside an
        # instruction (which the device's time would rightly count, and the
        # kernels' ground truth would not).
        gpu.launch(0.050, 0.5, 0.5)
    with energy.step():
        for mb in range(2):
            with energy.forward(mb):
                gpu.launch(0.015, 0.9, 0.9)  # returns at once: the host runs ahead
                if waits:
                    gpu.synchronize()
        for mb in range(2):
            with energy.backward(mb):
                gpu.launch(0.030, 0.7, 0.8)
                if waits:
                    gpu.synchronize()
        energy.pipeline_done()
        gpu.synchronize()  # the loss read
energy.close()
"""


def kernel_truth(log):
    """Mean device time and exact energy per (kind, clock) of the forward
    (15 ms) and backward (30 ms) kernels that ran wholly at one clock: the
    simulated ground truth."""
    kinds = {0.015: "forward", 0.030: "backward"}
    sums = {}
    for a in (c["args"] for c in log if c["function"] == "kernel"):
        if round(a["start_mhz"]) != round(a["end_mhz"]):
            continue
        kind = kinds.get(round(a["seconds_at_max_clock"], 3))
        if kind is None:
            continue  # the step's tail
        key = (kind, round(a["start_mhz"]))
        t, e, n = sums.get(key, (0.0, 0.0, 0))
        sums[key] = (t + a["end_unix_s"] - a["start_unix_s"], e + a["energy_j"], n + 1)
    return {k: (t / n, e / n) for k, (t, e, n) in sums.items()}


def profile_rows(path):
    """(stage, kind, clock, time, energy) of a profile CSV's rows."""
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return [line.split(",")[:5] for line in lines[1:]]


@pytest.mark.parametrize("mode", ["stream", "host", "host-waits"])
def test_profile_rows_are_the_devices_only_with_the_stream(tmp_path, mode):
    out = tmp_path / "profile.csv"
    r = run_child(tmp_path, PROFILE_CHILD, out, mode)
    assert r.returncode == 0, r.stderr
    truth = kernel_truth(calls(tmp_path))
    if mode == "host":
        # The rows are how long the host took to enqueue: the planner
        # refuses them, or they are far from the device's truth.
        if out.exists():
            rows = profile_rows(out)
            assert all(float(t) < 0.5 * min(s for s, _ in truth.values()) for *_, t, _ in rows)
        return
    # Where the host waits for each kernel its points are the device's, and
    # a row's energy is the power sampled while it ran (never one reading at
    # its end, when the GPU is idle: 70 % short before), but for the host's
    # own delays: waking after each kernel took 12 % more on a loaded CI
    # machine (2 % idle), so host points are held to 20 %.
    # With the stream the rows are the device's; the simulated device's
    # event thread oversleeps now and then (a row 4.9 % off once in a
    # clean-clone CI run), so 5 %, as test_iteration_lines_... and the
    # megatron profile test.
    tolerance = 0.05 if mode == "stream" else 0.20
    if mode == "stream":
        assert "where the GPU is" in r.stderr, r.stderr
    rows = profile_rows(out)
    assert len(rows) >= 4, rows
    for _, kind, mhz, t, e in rows:
        near = min((k for k in truth if k[0] == kind), key=lambda k: abs(k[1] - int(mhz)))
        true_t, true_e = truth[near]
        assert abs(float(t) / true_t - 1) <= tolerance, (kind, mhz, t, truth)
        assert abs(float(e) / true_e - 1) <= tolerance, (kind, mhz, e, truth)


def test_a_plan_is_not_said_applied_on_a_gpu_that_refuses_every_change(tmp_path):
    """Issue 56, item 5: without clock permission, "plan ... applied" was
    printed before the fallback. Now the clock control is asked first (a
    reset, through the controller's thread) and the plan is refused, said
    once, before any iteration."""
    import build_paths
    import subprocess
    import sys

    from sim_gpu import SIM, STEP

    config = tmp_path / "sim.json"
    config.write_text(json.dumps(dict(SIM, permissions={"clocks": False},
                                      call_log=str(tmp_path / "calls.jsonl"))))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    body = """
energy = jp.Energy("optimize", plan=sys.argv[1], microbatches=2)
for _ in range(2):
    with energy.step():
        for mb in range(2):
            with energy.forward(mb):
                pass
            with energy.backward(mb):
                pass
        energy.pipeline_done()
energy.close()
"""
    r = subprocess.run([sys.executable, "-c", STEP + body, str(plan)],
                       env=build_paths.python_env(config), capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "applied to stage" not in r.stderr, r.stderr
    assert "cannot change GPU 0's clocks through nvml" in r.stderr, r.stderr
    assert r.stderr.count("fell back") == 1, r.stderr
    assert "clock changes" not in r.stderr, r.stderr  # no "plan v1, 0 clock changes"


# A loop that queues three steps before it reads a loss: the host runs a
# whole step or two ahead of the device.
LINES_CHILD = """
import json, sys
from joulepipe import _core
follow = sys.argv[1] == "stream"
gpu = _core.SimulatedStream(0)
options = {"stream": gpu.handle} if follow else {}
energy = jp.Energy("measure", microbatches=2, **options)
for i in range(9):
    with energy.step():
        for mb in range(2):
            with energy.forward(mb):
                gpu.launch(0.015, 0.9, 0.9)
            with energy.backward(mb):
                gpu.launch(0.030, 0.7, 0.8)
        energy.pipeline_done()
        if i % 3 == 2:
            gpu.synchronize()  # the loss read, every third step
energy.close()
print(json.dumps([[r.iteration, r.time_s, r.energy_j, r.method] for r in energy.records]))
"""


@pytest.mark.parametrize("mode", ["stream", "host"])
def test_iteration_lines_are_the_devices_only_with_the_stream(tmp_path, mode):
    """Issue 58, item 2: with the stream, a step's time and energy are the
    device's (events at its begin and end), even where the host ran two
    steps ahead; at the host's points they are the enqueue's, or the wait."""
    r = run_child(tmp_path, LINES_CHILD, mode)
    assert r.returncode == 0, r.stderr
    records = json.loads(r.stdout.strip().splitlines()[-1])
    assert [i for i, *_ in records] == list(range(9)), r.stderr
    kernels = sorted((c["args"] for c in calls(tmp_path) if c["function"] == "kernel"),
                     key=lambda a: a["start_unix_s"])
    assert len(kernels) == 36
    worst_t = worst_e = 0.0
    for i, time_s, energy_j, method in records:
        mine = kernels[4 * i:4 * i + 4]
        true_t = mine[-1]["end_unix_s"] - mine[0]["start_unix_s"]
        true_e = sum(k["energy_j"] for k in mine)
        worst_t = max(worst_t, abs(time_s / true_t - 1))
        worst_e = max(worst_e, abs(energy_j / true_e - 1))
        if mode == "stream":
            assert method == "sampled", records
    if mode == "stream":
        # Within 1 % on an idle machine; beside two busy processes the
        # simulated device's event thread oversleeps (3.4 % once under
        # ci-under-load), so 5 %, as the profile rows' test. The host's
        # points are over 50 % off (below): the check still tells them apart.
        assert worst_t <= 0.05 and worst_e <= 0.05, (worst_t, worst_e, records)
        assert r.stderr.count("J/iter/GPU (sampled)") == 9, r.stderr
    else:
        assert worst_t > 0.5 and worst_e > 0.5, (worst_t, worst_e, records)


# Steps timed on the stream, then an evaluation between them.
PHASE_CHILD = """
import json, sys
from joulepipe import _core
gpu = _core.SimulatedStream(0)
energy = jp.Energy("measure", microbatches=1, stream=gpu.handle)
timing = energy._session._timing
samplers = []
for i in range(3):
    with energy.step():
        with energy.forward(0):
            gpu.launch(0.015, 0.9, 0.9)
        energy.pipeline_done()
    samplers.append(timing.monitor is not None)
gpu.synchronize()
energy._session.phase_begin("evaluation")
samplers.append(timing.monitor is not None)
gpu.launch(0.2, 0.9, 0.9)
gpu.synchronize()
phase = energy._session.phase_end()
samplers.append(timing.monitor is not None)
energy.close()
print(json.dumps([samplers, phase.time_s, phase.energy_j]))
"""


def test_with_the_stream_only_a_phase_samples_besides_the_step_meter(tmp_path):
    """With the stream, the step meter samples the GPU's power during steps;
    the monitor's own sampler (500 reads a second) runs only inside a phase,
    whose energy is still measured."""
    r = run_child(tmp_path, PHASE_CHILD, "stream")
    assert r.returncode == 0, r.stderr
    samplers, time_s, energy_j = json.loads(r.stdout.strip().splitlines()[-1])
    assert samplers == [False, False, False, True, False], samplers
    kernel = max((c["args"] for c in calls(tmp_path) if c["function"] == "kernel"),
                 key=lambda a: a["end_unix_s"] - a["start_unix_s"])
    assert time_s >= kernel["end_unix_s"] - kernel["start_unix_s"]
    assert 0.9 <= energy_j / kernel["energy_j"] <= 1.3, (energy_j, kernel)

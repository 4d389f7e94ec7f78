"""A GPU is never left at a clock the user did not ask for: every mode x
every way out of a training process ends, in the simulated NVML library's
call log, with a reset as the last call on the rank's GPU.

Modes: measure (no clock is ever set), profile (the in-situ sweep), optimize
with a plan file, optimize embedded (profile, then plan on rank 0) and
optimize through `joulepipe serve`. Ways out, each taken while a clock is
locked (inside a forward): the script just ends without close(),
sys.exit() inside training, an uncaught exception, SIGTERM (torchrun's and
SLURM's) and SIGINT (Ctrl-C). A second test checks that what runs between
steps (an evaluation pass, the optimizer) runs at default clocks.

The child is a plain loop of joulepipe.pytorch (torch itself is kept out so
a run takes a second, not the ten an import of torch costs here).
"""

import signal
import subprocess
import sys
import time

import pytest

from build_paths import CLI, package_built, python_env
from sim_gpu import calls, run_child, write_config

if not package_built():
    pytest.skip("joulepipe._core not built (pip install pybind11; cmake --build build)",
                allow_module_level=True)

MODES = ["measure", "profile", "optimize-plan", "optimize-embedded", "optimize-service"]
WAYS = ["end", "exit", "raise", "sigterm", "sigint"]

# The loop drives the session's hooks itself (what joulepipe.megatron's
# wrappers do), so no context manager's exit gives the clocks back first:
# every way out leaves from inside a forward, its clock locked, and only
# joulepipe's exit and signal handlers stand between it and a locked GPU.
CHILD = """
import os, signal, sys, time
sys.modules["torch"] = None  # a loop without torch (see the module's docstring)
import joulepipe.pytorch as jp

# Python's own signal handling, as in a training script started from a
# shell: a test runner started in the background (CI) passes SIGINT on as
# ignored, and Python then keeps it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

MODE, WAY, OPTIONS = sys.argv[1], sys.argv[2], eval(sys.argv[3])
energy = jp.Energy(MODE.split("-")[0], microbatches=2, log=lambda line: print(line, flush=True),
                   **OPTIONS)
s = energy._session
# In a job of several ranks the rounds' daemon thread (_exchange.Link) holds
# the session, so the interpreter's shutdown never destroys its agent: hold
# it the same way here, or the end of the interpreter would hide a missing
# exit handler.
import threading
threading.Thread(target=lambda held=energy: time.sleep(3600), daemon=True).start()

def ready(step):
    if MODE == "measure":
        return step >= 2
    agent = s._agent
    return agent is not None and not agent.closed and agent.wait_idle(1.0) and \\
        agent.stats()["last_applied_mhz"] > 0

def train():
    deadline = time.monotonic() + 60
    step = 0
    while time.monotonic() < deadline:
        s.set_shape("1f1b", 2, 1)
        s.iteration_begin()
        for mb in range(2):
            s.forward_begin(mb, 0)
            time.sleep(0.004)
            if ready(step):
                if WAY == "end":
                    return  # the forward never ends
                if WAY == "exit":
                    sys.exit(3)
                if WAY == "raise":
                    raise RuntimeError("a bug in training")
                print("READY", flush=True)
            s.forward_end(mb, 0)
        for mb in range(2):
            s.backward_begin(mb, 0)
            time.sleep(0.006)
            s.backward_end(mb, 0)
        s.pipeline_end()
        s.iteration_end()
        step += 1

train()
print("ENDED", flush=True)  # no close(), no disable()
"""

EXPECTED_RC = {"end": 0, "exit": 3, "raise": 1, "sigterm": -signal.SIGTERM,
               "sigint": -signal.SIGINT}


@pytest.fixture(scope="module")
def plan_and_profile(tmp_path_factory):
    """A one-stage profile and its plan for 2 microbatches (1F1B)."""
    d = tmp_path_factory.mktemp("plan")
    profile = d / "p1.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", "1", "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    subprocess.run([str(CLI), "plan", "--profile", str(profile), "--stages", "1",
                    "--microbatches", "2", "--schedule", "1f1b", "--out", str(d / "plan")],
                   check=True, capture_output=True, timeout=120)
    return d / "plan", profile


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from coord_server import Server

    s = Server("--db", str(tmp_path_factory.mktemp("serve") / "state.sqlite"))
    yield s
    s.stop()


def run(tmp_path, mode, way, options):
    config = write_config(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, way, repr(options)],
                            env=python_env(config), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = []
    try:
        if way in ("sigterm", "sigint"):
            for line in proc.stdout:
                out.append(line)
                if line.strip() == "READY":
                    proc.send_signal(signal.SIGTERM if way == "sigterm" else signal.SIGINT)
                    break
        rest, _ = proc.communicate(timeout=60)
        out.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(out)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("mode", MODES)
def test_every_way_out_ends_with_a_reset(tmp_path, mode, way, plan_and_profile, request):
    plan, profile = plan_and_profile
    options = {}
    if mode == "optimize-plan":
        options = {"plan": str(plan)}
    elif mode == "optimize-service":
        url = request.getfixturevalue("server").url
        options = {"coordinator": url, "profile": str(profile),
                   "job_id": f"exit-{way}-{time.monotonic_ns()}"}
    elif mode in ("profile", "optimize-embedded"):
        options = {"profile_stride_mhz": 150}
    rc, out = run(tmp_path, mode, way, options)
    assert rc == EXPECTED_RC[way], out
    assert ("ENDED" in out) == (way == "end"), out
    log = calls(tmp_path)
    if mode == "measure":
        assert log == [], log  # measure never sets a clock
        return
    locks = [c for c in log if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    assert locks, out  # the way out was taken while a clock was locked
    last = [c for c in log if c["device"] == 0][-1]
    assert last["function"] == "nvmlDeviceResetGpuLockedClocks" and last["result"] == 0, (
        last, out)
    if way in ("sigterm", "sigint"):
        name = "SIGTERM" if way == "sigterm" else "SIGINT"
        assert f"{name} received: GPU 0 is back at its default clocks" in out, out


EVAL = """
energy = jp.Energy("optimize", microbatches=2, plan=sys.argv[1])
agent = energy._session._agent
for _ in range(3):
    step(energy)
    # The optimizer, an evaluation pass: not in the plan.
    print("BETWEEN", agent.stats()["last_applied_mhz"], flush=True)
energy.close()
"""


def test_between_steps_the_gpu_runs_at_default_clocks(tmp_path, plan_and_profile):
    plan, _ = plan_and_profile
    proc = run_child(tmp_path, EVAL, plan)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    between = [l for l in proc.stdout.splitlines() if l.startswith("BETWEEN")]
    assert between == ["BETWEEN 0"] * 3, proc.stdout + proc.stderr
    log = calls(tmp_path)
    # Every step: its planned locks, then a reset before what follows it.
    functions = [c["function"] for c in log]
    assert functions.count("nvmlDeviceResetGpuLockedClocks") >= 3, functions
    assert "nvmlDeviceSetGpuLockedClocks" in functions
    assert functions[-1] == "nvmlDeviceResetGpuLockedClocks"


IGNORED = """
import os, signal
import joulepipe._guard as guard
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `nohup`, or `cmd &` in a script, leave it
energy = jp.Energy("optimize", microbatches=2, plan=sys.argv[1])
agent = energy._session._agent
print("SIGINT", "ignored" if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else "handled")
print("SIGTERM", "joulepipe" if signal.getsignal(signal.SIGTERM) is guard._on_signal else "other")
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.1)
step(energy)
print("CLOSED", agent.closed, flush=True)
energy.close()
"""


def test_an_ignored_signal_stays_ignored(tmp_path, plan_and_profile):
    # Handling an ignored SIGINT would give the clocks back and let training
    # go on at default clocks, for a signal the launcher made harmless.
    plan, _ = plan_and_profile
    proc = run_child(tmp_path, IGNORED, plan)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "SIGINT ignored" in lines and "SIGTERM joulepipe" in lines, proc.stdout + proc.stderr
    assert "CLOSED False" in lines, proc.stdout + proc.stderr
    assert "SIGINT received" not in proc.stdout + proc.stderr
    functions = [c["function"] for c in calls(tmp_path)]
    assert "nvmlDeviceSetGpuLockedClocks" in functions, functions
    assert functions[-1] == "nvmlDeviceResetGpuLockedClocks"

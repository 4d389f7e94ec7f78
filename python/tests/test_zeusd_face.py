"""Zeus 0.16.0, unchanged, against joulepiped's zeusd face (issue 59).

joulepiped runs on the simulated NVML library with the permissions (its
call log is the GPUs' truth); the Zeus processes load the same library
through pynvml without them, sharing its state file, and reach the GPUs'
settings only through ZEUSD_SOCK_PATH. docs/daemon.md, "Zeus's daemon API".
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from build_paths import BUILD, LIB, sim_nvml_env

pytest.importorskip("zeus", reason="Zeus is not installed (scripts/install-deps installs "
                                   "zeus==0.16.0)")
DAEMON = BUILD / "joulepiped"
if not LIB.exists() or not DAEMON.exists():
    pytest.skip(f"the simulated NVML library or joulepiped is not built ({LIB}, {DAEMON})",
                allow_module_level=True)

SIM = {"gpu": "a100-sxm4-80gb", "count": 2}
PREAMBLE = """
import json, sys, time
def out(value):
    print("RESULT " + json.dumps(value), flush=True)
"""


class Daemon:
    """joulepiped with a zeusd socket, stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.calls = tmp_path / "calls.jsonl"
        state = tmp_path / "state.json"
        daemon_sim = tmp_path / "daemon-sim.json"
        daemon_sim.write_text(json.dumps(dict(
            SIM, permissions={"clocks": True, "power_limit": True, "persistence_mode": True},
            state_file=str(state), call_log=str(self.calls))))
        self.zeus_sim = tmp_path / "zeus-sim.json"  # no permissions: only the daemon sets
        self.zeus_sim.write_text(json.dumps(dict(SIM, state_file=str(state))))
        self.socket = tmp_path / "zeusd.sock"
        (tmp_path / "jp.json").write_text(json.dumps({
            "socket": str(tmp_path / "jp.sock"), "zeusd_socket": str(self.socket),
            "audit_log": str(tmp_path / "audit.log")}))
        env = sim_nvml_env(daemon_sim)
        env["JOULEPIPE_NVML_LIBRARY"] = str(LIB)
        self.stderr = open(tmp_path / "daemon.err", "w")
        self.proc = subprocess.Popen(
            ["timeout", "-s", "KILL", "600", str(DAEMON), "--config", str(tmp_path / "jp.json")],
            env=env, stdout=subprocess.DEVNULL, stderr=self.stderr)
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            assert self.proc.poll() is None, (tmp_path / "daemon.err").read_text()
            assert time.monotonic() < deadline, "joulepiped did not start"
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()

    def env(self):
        env = sim_nvml_env(self.zeus_sim, zeus=True)
        env["ZEUSD_SOCK_PATH"] = str(self.socket)
        return env

    def run(self, body, timeout=180):
        """Runs `body` in a fresh Zeus process; the value it passes to out()."""
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(PREAMBLE) +
                               textwrap.dedent(body)], env=self.env(), capture_output=True,
                              text=True, timeout=timeout, cwd=self.tmp)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        results = [json.loads(l[7:]) for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        assert len(results) == 1, proc.stdout + proc.stderr
        return results[0]

    def start(self, body):
        """Starts `body` in a process group of its own; returns once it printed READY."""
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PREAMBLE) +
                                 textwrap.dedent(body)], env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=self.tmp,
                                start_new_session=True)
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("READY"):
                return proc
        proc.kill()
        raise AssertionError("the Zeus process did not get ready:\n" + "".join(lines))

    def call_log(self):
        if not self.calls.exists():
            return []
        return [json.loads(l) for l in self.calls.read_text().splitlines()]


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    d.stop()


def test_zeus_monitor_power_limit_optimizer_and_frequency_controller_run(daemon):
    r = daemon.run("""
        import os
        from zeus.device import get_gpus
        from zeus.monitor import ZeusMonitor
        from zeus.optimizer.power_limit import GlobalPowerLimitOptimizer
        from zeus.optimizer.pipeline_frequency.frequency_controller import FrequencyController

        import zeus.monitor.energy
        # The windows wait for the GPU's work with torch.cuda.synchronize;
        # this torch has no CUDA and the simulated GPU runs nothing.
        zeus.monitor.energy.sync_execution_fn = lambda *args, **kwargs: None

        gpus = get_gpus()
        kinds = [type(g).__name__ for g in gpus.gpus]
        monitor = ZeusMonitor(gpu_indices=[0], approx_instant_energy=True)
        monitor.begin_window("window")
        time.sleep(0.3)
        window = monitor.end_window("window")

        plo = GlobalPowerLimitOptimizer(monitor, warmup_steps=1, profile_steps=2, pl_step=100)
        plo.on_epoch_begin()
        for step in range(40):
            plo.on_step_begin()
            time.sleep(0.02)
            plo.on_step_end()

        mem = max(gpus.get_supported_memory_clocks(1))
        clocks = sorted(gpus.get_supported_graphics_clocks(1, mem), reverse=True)
        f1 = clocks[len(clocks) // 3]
        controller = FrequencyController(device_id=1)
        controller.set_frequency(f1)
        controller.end()
        controller._proc.join(timeout=60)
        out({"kinds": kinds, "window_j": window.total_energy, "window_s": window.time,
             "limits": plo.power_limits, "state": type(plo.state).__name__,
             "controller_exit": controller._proc.exitcode, "controller_pid": controller._proc.pid,
             "pid": os.getpid(), "f1": f1, "mem": mem, "max_sm": clocks[0]})
    """)
    assert r["kinds"] == ["ZeusdNVIDIAGPU", "ZeusdNVIDIAGPU"]
    assert r["window_s"] >= 0.3 and r["window_j"] > 0
    assert r["controller_exit"] == 0
    calls = daemon.call_log()
    by_pid_gpu0 = [c for c in calls if c["device"] == 0]
    # The optimizer: persistence mode on, then each power limit it profiled,
    # every call through the daemon (the Zeus process has no permission).
    pids = {c["pid"] for c in calls}
    assert len(pids) == 1 and not pids & {r["pid"], r["controller_pid"]}, pids
    assert ("nvmlDeviceSetPersistenceMode", {"mode": 1}) in [
        (c["function"], c["args"]) for c in by_pid_gpu0]
    limits_set = [c["args"]["limit_mw"] if "limit_mw" in c["args"] else c["args"]
                  for c in by_pid_gpu0 if c["function"] == "nvmlDeviceSetPowerManagementLimit"]
    assert len(limits_set) >= 2, limits_set
    # The controller on GPU 1: memory clocks, the top SM clock, f1, then resets.
    gpu1 = [(c["function"], c["args"]) for c in calls if c["device"] == 1]
    assert ("nvmlDeviceSetMemoryLockedClocks", {"min_mhz": r["mem"], "max_mhz": r["mem"]}) in gpu1
    assert ("nvmlDeviceSetGpuLockedClocks", {"min_mhz": r["f1"], "max_mhz": r["f1"]}) in gpu1
    assert gpu1[-1][0] in ("nvmlDeviceResetGpuLockedClocks", "nvmlDeviceSetPowerManagementLimit")
    assert all(c["result_name"] == "NVML_SUCCESS" for c in calls)
    print(f"[zeusd] {len(calls)} setter calls through joulepiped: " + ", ".join(
        f"{name.removeprefix('nvmlDevice')} x{sum(c['function'] == name for c in calls)}"
        for name in sorted({c["function"] for c in calls})))


LIVE = """
    from zeus.device import get_gpus
    gpus = get_gpus()
    gpus.set_power_management_limit(0, 250000)
    print("READY", flush=True)
    time.sleep(600)
"""

KILLED = """
    from zeus.device import get_gpus
    from zeus.optimizer.pipeline_frequency.frequency_controller import FrequencyController
    gpus = get_gpus()
    mem = max(gpus.get_supported_memory_clocks(0))
    clocks = sorted(gpus.get_supported_graphics_clocks(0, mem), reverse=True)
    controller = FrequencyController(device_id=0)
    controller.set_frequency(clocks[len(clocks) // 2])
    # Wait until the controller's lock reached the GPU (the shared state).
    import pynvml
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    deadline = time.time() + 60
    while time.time() < deadline:
        if pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) == clocks[len(clocks) // 2]:
            break
        time.sleep(0.01)
    print("READY", flush=True)
    time.sleep(600)
"""


def test_a_killed_zeus_process_gives_its_gpu_back_and_a_live_ones_setting_survives(daemon):
    live = daemon.start(LIVE)
    try:
        delays = []
        for round in range(10):
            proc = daemon.start(KILLED)
            before = len(daemon.call_log())
            os.killpg(proc.pid, signal.SIGKILL)  # the rank and its controller, as a node drain
            died = time.time()
            proc.wait(timeout=30)
            # The last SM-clock call on GPU 0 is a reset, and the power limit is
            # the live process's again (the controller had set the default).
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                after = daemon.call_log()[before:]
                sm = [c for c in after if c["device"] == 0 and "GpuLockedClocks" in c["function"]]
                pl = [c for c in after if c["device"] == 0 and "PowerManagementLimit" in c["function"]]
                if sm and pl:
                    break
                time.sleep(0.02)
            assert sm and sm[-1]["function"] == "nvmlDeviceResetGpuLockedClocks", after
            assert pl and pl[-1]["args"] == {"limit_mw": 250000}, after
            delays.append(max(sm[-1]["t"], pl[-1]["t"]) - died)
        assert max(delays) < 1.0, delays
        print(f"[zeusd] 10 kill -9: restore after {min(delays) * 1e3:.1f}..{max(delays) * 1e3:.1f} ms")
        audit = (daemon.tmp / "audit.log").read_text()
        assert "op=restore_gpu_locked_clocks" in audit
        assert live.poll() is None
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait(timeout=30)

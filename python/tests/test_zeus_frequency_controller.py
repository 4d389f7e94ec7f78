"""Zeus 0.16.0's GPU layer and its pipeline frequency controller, unmodified,
against the simulated NVML library build/sim-nvml/libnvidia-ml.so.1
(docs/sim-nvml.md, "Zeus").

Zeus reaches NVML through pynvml, which dlopens "libnvidia-ml.so.1": each
scenario runs in a fresh Python process whose LD_LIBRARY_PATH points at the
simulated library, configured through JOULEPIPE_SIM_NVML_CONFIG with the
clock permission, a call log and a state file. Zeus needs no CUDA for this:
get_gpus() only asks NVML, so nothing of torch is patched. The build
directory is $JOULEPIPE_BUILD_DIR (default: build/ in the repo).
"""

import json
import subprocess
import sys
import textwrap

import pytest

from build_paths import LIB, sim_nvml_env

pytest.importorskip("zeus", reason="Zeus is not installed (scripts/install-deps installs "
                                   "zeus==0.16.0 and its pipeline-frequency client)")
if not LIB.exists():
    pytest.skip(f"simulated NVML library not built: {LIB} (cmake --build build)",
                allow_module_level=True)

# (catalog id, max memory clock, max SM clock): the A100 and H100 boards.
GPUS = [("a100-sxm4-80gb", 1593, 1410), ("h100-sxm", 2619, 1980)]


def run_zeus(tmp_path, config, body, timeout=120):
    """Runs `body` (Python source) in a fresh process that loads the simulated
    library through pynvml, configured by `config`; returns the JSON the body
    passes to out(...)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config))
    script = textwrap.dedent("""
        import json
        def out(value):
            print("RESULT " + json.dumps(value), flush=True)
    """) + textwrap.dedent(body)
    env = sim_nvml_env(cfg, zeus=True)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines()
               if line.startswith("RESULT ")]
    assert len(results) == 1, proc.stdout + proc.stderr
    return results[0]


@pytest.mark.parametrize("gpu,max_mem_mhz,max_sm_mhz", GPUS)
def test_frequency_controller_locks_and_resets_clocks(tmp_path, gpu, max_mem_mhz, max_sm_mhz):
    log = tmp_path / "calls.jsonl"
    state = tmp_path / "state.json"
    config = {"gpu": gpu, "count": 2, "permissions": {"clocks": True},
              "call_log": str(log), "state_file": str(state)}
    r = run_zeus(tmp_path, config, """
        import os
        import pynvml
        from zeus.device import get_gpus
        from zeus.optimizer.pipeline_frequency.frequency_controller import FrequencyController

        # As PipelineFrequencyOptimizer does: the GPU layer first, in this
        # process; the controller process forks from it.
        gpus = get_gpus()
        mem = max(gpus.get_supported_memory_clocks(1))
        clocks = sorted(gpus.get_supported_graphics_clocks(1, mem), reverse=True)
        f1, f2 = clocks[len(clocks) // 3], clocks[len(clocks) // 2]
        controller = FrequencyController(device_id=1)
        controller.set_frequency(f1)
        controller.set_frequency(0)  # Zeus: zero means "leave the clock"
        controller.set_frequency(f2)
        controller.end()
        controller._proc.join(timeout=60)
        out({"exitcode": controller._proc.exitcode, "controller_pid": controller._proc.pid,
             "pid": os.getpid(), "f1": f1, "f2": f2, "clocks": clocks, "mem": mem,
             "sm_after": pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(1),
                                                       pynvml.NVML_CLOCK_SM)})
    """)
    assert r["exitcode"] == 0
    assert r["mem"] == max_mem_mhz and r["clocks"][0] == max_sm_mhz
    f1, f2 = r["f1"], r["f2"]
    assert max_sm_mhz > f1 > f2

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # Every setter call came from the controller process, succeeded, and
    # went to device 1; the power limit was already the default, so Zeus
    # left it alone.
    assert {(c["pid"], c["device"], c["result_name"]) for c in calls} == {
        (r["controller_pid"], 1, "NVML_SUCCESS")}
    assert r["controller_pid"] != r["pid"]
    assert [(c["function"], c["args"]) for c in calls] == [
        ("nvmlDeviceSetMemoryLockedClocks", {"min_mhz": max_mem_mhz, "max_mhz": max_mem_mhz}),
        ("nvmlDeviceSetGpuLockedClocks", {"min_mhz": max_sm_mhz, "max_mhz": max_sm_mhz}),
        ("nvmlDeviceSetGpuLockedClocks", {"min_mhz": f1, "max_mhz": f1}),
        ("nvmlDeviceSetGpuLockedClocks", {"min_mhz": f2, "max_mhz": f2}),
        ("nvmlDeviceResetMemoryLockedClocks", {}),
        ("nvmlDeviceResetGpuLockedClocks", {}),
    ]

    # The device's settings went through the same steps (state file shared
    # by both processes) and end unlocked: idle at the lowest clock.
    devices = json.loads(state.read_text())["devices"]
    assert len(devices) == 1
    (history,) = devices.values()
    steps = [(s["settings"].get("locked_mhz"), s["settings"].get("mem_locked_mhz"))
             for s in history["changes"]]
    mem = [max_mem_mhz, max_mem_mhz]
    assert steps == [(None, mem), ([max_sm_mhz] * 2, mem), ([f1] * 2, mem), ([f2] * 2, mem),
                     ([f2] * 2, None), (None, None)]
    assert r["sm_after"] == r["clocks"][-1]


@pytest.mark.parametrize("gpu", [g[0] for g in GPUS])
def test_zeus_gpu_queries(tmp_path, gpu):
    config = {"gpu": gpu, "permissions": {"persistence_mode": True}}
    r = run_zeus(tmp_path, config, """
        from zeus.device import get_gpus
        from zeus.device.gpu import ZeusGPUNotSupportedError

        gpus = get_gpus()
        gpu = gpus.gpus[0]
        res = {"name": gpu.get_name(), "grace_hopper": gpu._is_grace_hopper,
               "temperature": gpus.get_gpu_temperature(0),
               "average_mw": gpus.get_average_power_usage(0),
               "persistence": [gpus.get_persistence_mode(0)]}
        gpus.set_persistence_mode(0, enabled=True)
        res["persistence"].append(gpus.get_persistence_mode(0))
        try:
            res["memory_mw"] = gpus.get_average_memory_power_usage(0)
        except ZeusGPUNotSupportedError:
            res["memory_mw"] = "not supported"
        out(res)
    """)
    assert 20 <= r["temperature"] <= 100
    assert r["persistence"] == [False, True]
    if gpu.startswith("h100"):
        assert r["name"] == "NVIDIA H100 80GB HBM3"
        # Zeus took isC2cEnabled = 0 from nvmlDeviceGetC2cModeInfoV.
        assert r["grace_hopper"] == 0 and r["grace_hopper"] is not False
        # Idle H100: the memory subsystem draws about two thirds of the board.
        assert 0.6 * r["average_mw"] < r["memory_mw"] < 0.7 * r["average_mw"]
    else:
        assert r["name"] == "NVIDIA A100-SXM4-80GB"
        # nvmlDeviceGetC2cModeInfoV said NOT_SUPPORTED; Zeus's fallback.
        assert r["grace_hopper"] is False
        assert r["memory_mw"] == "not supported"

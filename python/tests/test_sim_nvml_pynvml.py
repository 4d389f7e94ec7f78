"""pynvml (PyPI package nvidia-ml-py), unchanged, against the simulated NVML
library build/sim-nvml/libnvidia-ml.so.1 (docs/sim-nvml.md).

Each scenario runs in a fresh Python process whose LD_LIBRARY_PATH points at
the simulated library, so pynvml's own dlopen("libnvidia-ml.so.1") finds it.
The build directory is $JOULEPIPE_BUILD_DIR (default: build/ in the repo).
"""

import json
import subprocess
import sys
import textwrap
import time

import pytest

from build_paths import LIB, sim_nvml_env

pytest.importorskip("pynvml", reason="pynvml not installed (pip install nvidia-ml-py)")
if not LIB.exists():
    pytest.skip(f"simulated NVML library not built: {LIB} (cmake --build build)",
                allow_module_level=True)


def run_pynvml(tmp_path, config, body):
    """Runs `body` (Python source using pynvml as `n`) with the simulated
    library configured by `config`; returns the JSON the body prints via
    out(...)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config))
    script = textwrap.dedent("""
        import json, sys
        import pynvml as n
        def out(value):
            print("RESULT " + json.dumps(value))
        def loaded_library():
            with open("/proc/self/maps") as maps:
                return sorted({l.split()[-1] for l in maps if "libnvidia-ml" in l})
    """) + textwrap.dedent(body)
    env = sim_nvml_env(cfg)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines()
               if line.startswith("RESULT ")]
    assert len(results) == 1, proc.stdout + proc.stderr
    return results[0]


def test_read_only_calls_and_setters_without_permission(tmp_path):
    epoch = time.time() - 10
    config = {"gpu": "h100-sxm", "count": 2, "epoch_unix_s": epoch}
    r = run_pynvml(tmp_path, config, """
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(1)
        res = {"lib": loaded_library(),
               "driver": n.nvmlSystemGetDriverVersion(),
               "nvml": n.nvmlSystemGetNVMLVersion(),
               "cuda": n.nvmlSystemGetCudaDriverVersion(),
               "count": n.nvmlDeviceGetCount(),
               "name": n.nvmlDeviceGetName(h),
               "uuid": n.nvmlDeviceGetUUID(h),
               "index": n.nvmlDeviceGetIndex(h),
               "energy": n.nvmlDeviceGetTotalEnergyConsumption(h),
               "power": n.nvmlDeviceGetPowerUsage(h),
               "sm": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
               "max_sm": n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM),
               "mem_clocks": n.nvmlDeviceGetSupportedMemoryClocks(h),
               "constraints": n.nvmlDeviceGetPowerManagementLimitConstraints(h),
               "limit": n.nvmlDeviceGetPowerManagementLimit(h),
               "default": n.nvmlDeviceGetPowerManagementDefaultLimit(h),
               "util": n.nvmlDeviceGetUtilizationRates(h).gpu,
               "temp": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
               "arch": n.nvmlDeviceGetArchitecture(h),
               "mig": n.nvmlDeviceGetMigMode(h),
               "fields": [(v.fieldId, v.nvmlReturn, v.value.uiVal) for v in
                          n.nvmlDeviceGetFieldValues(h, [n.NVML_FI_DEV_POWER_INSTANT])]}
        res["gfx_clocks"] = n.nvmlDeviceGetSupportedGraphicsClocks(h, res["mem_clocks"][0])
        res["index_by_uuid"] = n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByUUID(res["uuid"]))
        errors = []
        for call in (lambda: n.nvmlDeviceSetGpuLockedClocks(h, 900, 1200),
                     lambda: n.nvmlDeviceSetPowerManagementLimit(h, 300000)):
            try:
                call()
                errors.append(None)
            except n.NVMLError as e:
                errors.append(e.value)
        res["setter_errors"] = errors
        n.nvmlShutdown()
        out(res)
    """)
    assert r["lib"] == [str(LIB.resolve())]
    assert r["count"] == 2
    assert r["name"] == "NVIDIA H100 80GB HBM3"
    assert r["uuid"].startswith("GPU-") and len(r["uuid"]) == 40
    assert r["index"] == r["index_by_uuid"] == 1
    assert r["driver"] and r["nvml"].endswith(r["driver"]) and r["cuda"] >= 11000
    # Idle since the epoch 10 s ago: idle power times ~10 s (within a tick).
    idle_mw = r["power"]
    assert 40_000 < idle_mw < 120_000
    assert abs(r["energy"] - idle_mw * 10) < idle_mw * 0.5
    assert r["max_sm"] == 1980 and r["sm"] <= r["max_sm"]
    assert r["gfx_clocks"][0] == 1980 and r["gfx_clocks"][-1] == 345
    assert r["constraints"] == [200_000, 700_000]
    assert r["limit"] == r["default"] == 700_000
    assert r["util"] == 0
    assert 20 < r["temp"] < 100
    assert r["arch"] == n_arch("HOPPER")
    assert r["mig"] == [0, 0]
    assert r["fields"] == [[186, 0, idle_mw]]
    assert r["setter_errors"] == [4, 4]  # NVML_ERROR_NO_PERMISSION


def n_arch(name):
    import pynvml
    return getattr(pynvml, "NVML_DEVICE_ARCH_" + name)


def test_setters_with_permission_are_applied_and_logged(tmp_path):
    log = tmp_path / "calls.jsonl"
    config = {"permissions": {"clocks": True, "power_limit": True},
              "call_log": str(log), "state_file": str(tmp_path / "state.json"),
              "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0}]}
    r = run_pynvml(tmp_path, config, """
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        res = {"before": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)}
        n.nvmlDeviceSetGpuLockedClocks(h, 1005, 1005)
        res["locked"] = n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)
        n.nvmlDeviceSetPowerManagementLimit(h, 250000)
        res["limit"] = n.nvmlDeviceGetEnforcedPowerLimit(h)
        try:
            n.nvmlDeviceSetGpuLockedClocks(h, 1200, 900)
        except n.NVMLError_InvalidArgument:
            res["invalid"] = True
        n.nvmlDeviceResetGpuLockedClocks(h)
        res["reasons"] = n.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        n.nvmlShutdown()
        out(res)
    """)
    assert r["before"] > 1005
    assert r["locked"] == 1005
    assert r["limit"] == 250_000
    assert r["invalid"] is True
    assert r["reasons"] & 0x4  # SwPowerCap at 250 W under full load
    lines = [json.loads(l) for l in log.read_text().splitlines()]
    assert [(l["function"], l["result"]) for l in lines] == [
        ("nvmlDeviceSetGpuLockedClocks", 0),
        ("nvmlDeviceSetPowerManagementLimit", 0),
        ("nvmlDeviceSetGpuLockedClocks", 2),
        ("nvmlDeviceResetGpuLockedClocks", 0)]
    assert lines[0]["args"] == {"min_mhz": 1005, "max_mhz": 1005}


def test_faults_surface_as_pynvml_exceptions(tmp_path):
    config = {"epoch_unix_s": time.time() - 5,
              "devices": [{"faults": {"gpu_lost_at_s": 1}},
                          {"faults": {"energy_counter_not_supported": True}}]}
    r = run_pynvml(tmp_path, config, """
        n.nvmlInit()
        res = {}
        try:
            n.nvmlDeviceGetPowerUsage(n.nvmlDeviceGetHandleByIndex(0))
        except n.NVMLError_GpuIsLost:
            res["lost"] = True
        try:
            n.nvmlDeviceGetTotalEnergyConsumption(n.nvmlDeviceGetHandleByIndex(1))
        except n.NVMLError_NotSupported:
            res["no_counter"] = True
        n.nvmlShutdown()
        out(res)
    """)
    assert r == {"lost": True, "no_counter": True}


def test_driver_not_loaded(tmp_path):
    r = run_pynvml(tmp_path, {"init_error": "driver_not_loaded"}, """
        try:
            n.nvmlInit()
            out("initialised")
        except n.NVMLError_DriverNotLoaded as e:
            out(str(e))
    """)
    assert r != "initialised"

"""Zeus 0.16.0's own PipelineFrequencyOptimizer, unmodified, against
`joulepipe serve` (issue 11, item 4).

Two ranks (one pipeline of two stages) on the gloo backend with CPU torch,
each driving one GPU of the simulated NVML library with the clock
permission. Rank 0 registers the job through Zeus's POST /register_job,
both register their rank and block on GET /schedule until joulepipe has
planned the job from the profile given to `serve`; then each runs one
iteration of its schedule through Zeus's hooks. The clocks joulepipe
planned must appear, in order, in the simulated library's call log, set by
Zeus's frequency-controller process.

CPU torch has no CUDA: three torch.cuda calls Zeus makes are replaced with
no-ops (set_device, is_available, synchronize). Zeus's own code runs as
shipped.
"""

import json
import socket
import subprocess
import sys
import textwrap

import pytest

from build_paths import BUILD, CLI, LIB, sim_nvml_env
from coord_server import Server

pytest.importorskip("zeus", reason="Zeus is not installed (scripts/install-deps installs "
                                   "zeus==0.16.0 and its pipeline-frequency client)")
pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")
if not CLI.exists() or not LIB.exists():
    pytest.skip(f"joulepipe not built in {BUILD} (cmake --build build)", allow_module_level=True)

# A two-stage profile at clocks the simulated A100 supports (210..1410 in
# 15 MHz steps): lower clocks slower and cheaper, as measured ones are.
CLOCKS = [1410, 1305, 1200, 1095, 1005]


def write_profile(path):
    lines = ["# gpu: NVIDIA A100-SXM4-80GB", "# p_block_w: 80",
             "stage,instruction,frequency,time,energy"]
    for stage in (0, 1):
        for kind, base in (("forward", 0.010), ("backward", 0.020)):
            for f in CLOCKS:
                t = base * (1 + 0.3 * stage) * (1410 / f) ** 0.8
                w = 100 + 200 * (f / 1410) ** 2
                lines.append(f"{stage},{kind},{f},{t:.9f},{t * w:.9f}")
    path.write_text("\n".join(lines) + "\n")


RANK = textwrap.dedent("""
    import json, os, sys
    import torch
    import torch.distributed as dist
    # CPU torch: no CUDA device to select or synchronise.
    torch.cuda.set_device = lambda device: None
    torch.cuda.is_available = lambda: True
    torch.cuda.synchronize = lambda device=None: None
    from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    rank = int(sys.argv[1])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    opt = PipelineFrequencyOptimizer(
        rank=rank, dp_rank=0, pp_rank=rank, tp_rank=0, device_id=rank, dp_degree=1,
        pp_degree=2, tp_degree=1, world_size=2, server_url=sys.argv[2],
        job_metadata="e2e")
    schedule = [list(item) for item in opt.freq_schedule]
    opt.on_step_begin()
    for name, _ in schedule:
        opt.on_instruction_begin(name)
        opt.on_instruction_end(name)
    opt.on_step_end()
    opt.frequency_controller.end()
    opt.frequency_controller._proc.join(timeout=60)
    print("RESULT " + json.dumps({"job_id": opt.job_id, "schedule": schedule,
                                  "controller_pid": opt.frequency_controller._proc.pid,
                                  "exitcode": opt.frequency_controller._proc.exitcode}),
          flush=True)
    dist.destroy_process_group()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_zeus_client_gets_and_applies_joulepipes_plan(tmp_path):
    profile = tmp_path / "profile.csv"
    write_profile(profile)
    server = Server("--profile", str(profile), "--schedule", "1f1b", "--microbatches", "4")
    try:
        log = tmp_path / "calls.jsonl"
        config = {"gpu": "a100-sxm4-80gb", "count": 2, "permissions": {"clocks": True},
                  "call_log": str(log), "state_file": str(tmp_path / "state.json")}
        (tmp_path / "nvml.json").write_text(json.dumps(config))
        (tmp_path / "rank.py").write_text(RANK)
        env = sim_nvml_env(tmp_path / "nvml.json", zeus=True)
        env["MASTER_ADDR"] = "127.0.0.1"
        env["MASTER_PORT"] = str(free_port())
        procs = [subprocess.Popen([sys.executable, str(tmp_path / "rank.py"), str(r), server.url],
                                  env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=240)
            assert p.returncode == 0, out
            found = [json.loads(l[7:]) for l in out.splitlines() if l.startswith("RESULT ")]
            assert len(found) == 1, out
            results.append(found[0])

        job_id = results[0]["job_id"]
        assert results[1]["job_id"] == job_id
        assert "+dp1+pp2+tp1+" in job_id and job_id.endswith("+e2e"), job_id
        # The schedule Zeus received is joulepipe's plan for that rank.
        from urllib.parse import quote
        for rank, r in enumerate(results):
            assert r["exitcode"] == 0
            status, plan = server.request("GET", f"/jobs/{quote(job_id, safe='')}/plan?rank={rank}")
            assert status == 200, plan
            assert r["schedule"] == plan["frequencies"]
            assert sorted(n for n, _ in r["schedule"]) == ["backward"] * 4 + ["forward"] * 4
            assert all(f in CLOCKS for _, f in r["schedule"])

        # Each rank's controller locked its GPU at max, then walked the plan
        # (a clock equal to the current one is not set again), then reset.
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        for rank, r in enumerate(results):
            mine = [(c["function"], c["args"]) for c in calls
                    if c["device"] == rank and c["function"].endswith("GpuLockedClocks")]
            expected = [1410]
            for _, f in r["schedule"]:
                if f != expected[-1]:
                    expected.append(f)
            assert mine == [("nvmlDeviceSetGpuLockedClocks", {"min_mhz": f, "max_mhz": f})
                            for f in expected] + [("nvmlDeviceResetGpuLockedClocks", {})], mine
            assert {c["pid"] for c in calls if c["device"] == rank} == {r["controller_pid"]}
            assert {c["result_name"] for c in calls} == {"NVML_SUCCESS"}
        # joulepipe's plan is not all max clocks: something was slowed.
        assert any(f < 1410 for r in results for _, f in r["schedule"])
    finally:
        server.stop()

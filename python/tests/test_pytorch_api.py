"""joulepipe.pytorch in custom loops, on simulated GPUs: measure (energy per
step against the simulated counter, through logging), optimize with a plan
file (the clocks in the simulated library's call log), the fail-safe, and
the two-stage pipeline example under torchrun in every mode.

Every child process and torchrun has a timeout; gloo has its own
(--timeout-s), so a hang fails the test instead of stalling CI.
"""

import json
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from build_paths import CLI, REPO, package_built, python_env

if not package_built():
    pytest.skip("joulepipe._core not built (pip install pybind11; cmake --build build)",
                allow_module_level=True)
torch = pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")

EXAMPLE = REPO / "examples" / "pytorch" / "train_pipeline.py"
SIM = {"gpu": "a100-sxm4-80gb", "count": 2, "power_reading": "instant",
       "energy_update_period_ms": 100, "permissions": {"clocks": True},
       "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0, "compute_fraction": 0.8}]}


def sim_env(tmp_path, config=None, **extra):
    config = dict(config or SIM, call_log=str(tmp_path / "calls.jsonl"), **extra)
    path = tmp_path / "sim-nvml.json"
    path.write_text(json.dumps(config))
    return python_env(path)


def calls(tmp_path):
    path = tmp_path / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines()]


LOOP = """
import time, joulepipe.pytorch as jp
def train(energy, steps=4, microbatches=2):
    for step in range(steps):
        with energy.step():
            for mb in range(microbatches):
                with energy.forward(mb):
                    time.sleep(0.05)
                with energy.backward(mb):
                    time.sleep(0.1)
    energy.close()
    return [r.__dict__ for r in energy.records]
"""


def run_child(tmp_path, body, timeout=120, config=None):
    """Runs LOOP, then `body`, in a fresh Python on the simulated GPUs; returns
    what the body passes to out(...) and the child's stderr."""
    script = "import json\ndef out(v):\n    print('RESULT ' + json.dumps(v), flush=True)\n"
    proc = subprocess.run([sys.executable, "-c", script + LOOP + textwrap.dedent(body)],
                          env=sim_env(tmp_path, config), capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(l[7:]) for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert len(results) == 1, proc.stdout + proc.stderr
    return results[0], proc.stderr




def test_measure_logs_energy_per_step_through_logging(tmp_path):
    r, stderr = run_child(tmp_path, """
        import pynvml as n
        n.nvmlInit()
        power_w = n.nvmlDeviceGetPowerUsage(n.nvmlDeviceGetHandleByIndex(0)) / 1000
        import os
        os.umask(0o022)
        records = train(jp.Energy("measure", tokens_per_iteration=4096,
                                  log_path="energy-{rank}.jsonl"))
        out({"records": records, "power_w": power_w})
    """)
    # The iteration log is private to the user (issue 41, item 2), one line per step.
    log = tmp_path / "energy-0.jsonl"
    assert log.stat().st_mode & 0o777 == 0o600
    assert len(log.read_text().splitlines()) == 4
    records = r["records"]
    assert [x["iteration"] for x in records] == [0, 1, 2, 3]
    for x in records:
        # Constant simulated power: energy = P x time within two 100 ms ticks.
        assert x["energy_j"] == pytest.approx(r["power_w"] * x["time_s"],
                                              abs=2 * 0.1 * r["power_w"])
        assert x["tokens_per_s"] == pytest.approx(4096 / x["time_s"])
        assert x["j_per_token"] == pytest.approx(x["energy_j"] / 4096)
        assert x["plan_version"] == 0 and x["clocks_applied"] == 0
    # One line per step on the "joulepipe" logger (stderr: no logging configured).
    lines = [l for l in stderr.splitlines() if "J/iter/GPU" in l]
    assert len(lines) == 4 and "tokens/s" in lines[0], stderr
    assert calls(tmp_path) == []  # measure never touches clocks


def test_a_second_run_appends_to_its_log_and_leaves_a_foreign_one_alone(tmp_path):
    """A resumed run continues the iteration log (issue 43, item 2): a CSV
    keeps one header and both runs' rows; a file with other columns is left
    as it is, with a note."""
    (tmp_path / "other.csv").write_text("step,loss\n0,2.5\n")
    r, stderr = run_child(tmp_path, """
        train(jp.Energy("measure", log_path="energy.csv"), steps=2)
        train(jp.Energy("measure", log_path="energy.csv"), steps=3)
        train(jp.Energy("measure", log_path="other.csv"), steps=1)
        out(None)
    """)
    lines = (tmp_path / "energy.csv").read_text().splitlines()
    assert lines[0].startswith("iteration,time_s,") and len(lines) == 1 + 2 + 3, lines
    assert [l.split(",")[0] for l in lines[1:]] == ["0", "1", "0", "1", "2"]
    assert (tmp_path / "other.csv").read_text() == "step,loss\n0,2.5\n"
    assert "other.csv is there with other columns" in stderr, stderr


def test_a_step_reading_above_the_power_limit_is_marked_approximate(tmp_path):
    """A step whose energy reads as more than the GPU's power limit in force
    (400 W on the simulated A100) is marked approximate, said once (issue 43:
    484.5 W on a 400 W GPU was unmarked). The session's meter is replaced by
    one reading 484.5 W x the window, so no timing decides the outcome."""
    r, stderr = run_child(tmp_path, """
        import time, types
        class Reads484W:
            def begin(self, name):
                self.t = time.perf_counter()
            def end(self, name):
                d = time.perf_counter() - self.t
                return types.SimpleNamespace(gpu_energy_j=484.5 * d, approximate=False,
                                             gpu_sources=["sampling"])
        e = jp.Energy("measure")
        e._session._timing.monitor = Reads484W()
        out(train(e, steps=3, microbatches=1))
    """)
    # The session divides by its own step time, which can exceed the fake
    # meter's window by the calls between them (0.1 % seen on a busy CPU).
    assert [x["avg_power_w"] for x in r] == [pytest.approx(484.5, rel=0.01)] * 3
    assert all(x["approximate"] for x in r)
    assert stderr.count("above this GPU's power limit (400 W)") == 1, stderr
    assert stderr.count("J/iter/GPU (sampled, approx.)") == 3, stderr


def test_measure_follows_the_programs_logging_configuration(tmp_path):
    r, stderr = run_child(tmp_path, """
        import logging
        seen = []
        class Keep(logging.Handler):
            def emit(self, record):
                seen.append((record.name, record.levelname, record.getMessage()))
        logging.basicConfig(level=logging.INFO, handlers=[Keep()])
        train(jp.Energy("measure"), steps=2)
        out(seen)
    """)
    steps = [s for s in r if "J/iter/GPU" in s[2]]
    assert len(steps) == 2 and steps[0][:2] == ["joulepipe", "INFO"]
    assert "J/iter/GPU" not in stderr


def plan_file(tmp_path, clocks):
    """A one-stage, two-microbatch 1F1B plan with these four clocks (the order
    F0 B0 F1 B1)."""
    order = [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]
    plan = {"version": 1, "schedule": "1f1b", "num_stages": 1, "num_microbatches": 2,
            "num_chunks": 1,
            "stages": [[{"instruction": k, "microbatch": m, "chunk": 0, "frequency": f}
                        for (k, m), f in zip(order, clocks)]]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def test_optimize_applies_a_plan_file_and_saves_energy(tmp_path):
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    r, stderr = run_child(tmp_path, f"""
        base = train(jp.Energy("measure"), microbatches=2)
        opt = train(jp.Energy("optimize", plan={str(path)!r}, microbatches=2), microbatches=2)
        out({{"base": base, "opt": opt}})
    """)
    locked = [c["args"]["max_mhz"] for c in calls(tmp_path)
              if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    assert locked == [1005, 900, 1110, 855] * 4  # every instruction, every step
    assert calls(tmp_path)[-1]["function"] == "nvmlDeviceResetGpuLockedClocks"
    assert all(x["plan_version"] == 1 for x in r["opt"])
    assert sum(x["clocks_applied"] for x in r["opt"]) == 16
    # Lower clocks at the same (CPU-bound) time: less simulated energy.
    per_s = lambda xs: sum(x["energy_j"] for x in xs) / sum(x["time_s"] for x in xs)  # noqa
    assert per_s(r["opt"]) < 0.95 * per_s(r["base"])
    assert "applied to stage 0" in stderr


def test_optimize_applies_a_plan_files_wait_clocks(tmp_path):
    """A plan from plan --wait-model: the session hands the lowered waits to
    the agent, which locks the wait clock at those instructions' ends, and
    the head wait's clock at the step's beginning, restored before F0."""
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    plan = json.loads(path.read_text())
    plan["stages"][0][0].update(wait_frequency=600, wait_restore_s=0.5)  # after F0
    plan["head_waits"] = [{"wait_frequency": 705, "wait_restore_s": 0.02}]
    path.write_text(json.dumps(plan))
    r, stderr = run_child(tmp_path, f"""
        energy = jp.Energy("optimize", plan={str(path)!r}, microbatches=2)
        for step in range(2):
            with energy.step():
                time.sleep(0.1)  # waiting on the data (the head wait)
                for mb in range(2):
                    with energy.forward(mb):
                        time.sleep(0.02)
                    time.sleep(0.1)  # waiting on the next stage
                    with energy.backward(mb):
                        time.sleep(0.02)
        energy.close()
        out([r.__dict__ for r in energy.records])
    """)
    locked = [c["args"]["max_mhz"] for c in calls(tmp_path)
              if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    # Per step: the head wait, F0 (restored before it began), the wait after
    # it, B0, F1, B1.
    assert locked == [705, 1005, 600, 900, 1110, 855] * 2, (str(locked), stderr)
    assert "head-wait@705 F0@1005/wait@600" in stderr, stderr


def test_optimize_applies_a_grid_plans_hold_clock_and_start_ramp(tmp_path):
    """A grid plan (simulate --grid-plan-out): every wait inside a step is
    held at the hold clock, and for the first start_ramp_s seconds every
    clock is capped by the ramp's step then due, between steps too; after
    it the plan's clocks, and default clocks between steps."""
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    plan = json.loads(path.read_text())
    plan["grid"] = {"hold_frequency": [1410], "start_ramp_s": 4,
                    "start_ramp_frequencies": [600, 1005]}  # 2 s each
    path.write_text(json.dumps(plan))
    r, stderr = run_child(tmp_path, f"""
        energy = jp.Energy("optimize", plan={str(path)!r}, microbatches=2)
        start = time.monotonic()
        unix_start = time.time()
        for step, at in enumerate((0, 2.3, 4.3, 4.3)):  # two steps in the ramp, two after
            time.sleep(max(0.0, start + at - time.monotonic()))
            with energy.step():
                for mb in range(2):
                    with energy.forward(mb):
                        time.sleep(0.02)
                    time.sleep(0.05)  # waiting on the next stage: held
                    with energy.backward(mb):
                        time.sleep(0.02)
                    time.sleep(0.05)
        energy.close()
        out(unix_start)
    """)
    log = [c for c in calls(tmp_path) if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    locked = [c["args"]["max_mhz"] for c in log]
    at = [c["t"] - r for c in log]  # seconds from the loop's start
    # Step 1 (t < 2 s) under 600 MHz: every request capped to it. Step 2
    # (2..4 s) under 1005: F1's 1110 capped, the holds at 1005. Steps 3 and
    # 4 run the plan, waits held at 1410. A busy machine may coalesce two
    # requests into one call, so each part is checked for what it must and
    # may contain, not call by call (on an idle machine the calls are
    # exactly [600] + [1005, 900, 1005, 855, 1005] + [1410] + the plan's).
    first = [m for m, t in zip(locked, at) if t < 2]
    second = [m for m, t in zip(locked, at) if 2.2 <= t < 4]
    after = [m for m, t in zip(locked, at) if t >= 4.2]
    assert first == [600], (str(locked), stderr)
    assert second and set(second) <= {1005, 900, 855} and 1005 in second, (str(locked), stderr)
    assert set(after) <= {1410, 1005, 900, 1110, 855}, (str(locked), stderr)
    assert {900, 1110, 855, 1410} <= set(after), (str(locked), stderr)
    assert max(second) <= 1005 and 1110 not in second, (str(locked), stderr)
    resets = [c for c in calls(tmp_path) if c["function"] == "nvmlDeviceResetGpuLockedClocks"]
    assert len(resets) >= 2, stderr  # steps 3 and 4 end at default clocks
    assert "waits held at 1410 MHz; start ramp 4 s: 600 1005 MHz" in stderr, stderr


def test_a_grid_plans_pipeline_offset_delays_each_pipeline_by_its_rank(tmp_path):
    """grid.pipeline_offset_s: data-parallel pipeline p waits p x the offset
    at each step's beginning (inside the iteration, as simulated); pipeline
    0 does not wait."""
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    plan = json.loads(path.read_text())
    plan["grid"] = {"hold_frequency": [0], "pipeline_offset_s": 0.25}
    path.write_text(json.dumps(plan))
    r, stderr = run_child(tmp_path, f"""
        times = {{}}
        for dp_rank in (0, 2):
            energy = jp.Energy("optimize", plan={str(path)!r}, microbatches=2, dp=3,
                               dp_rank=dp_rank)
            times[dp_rank] = [x["time_s"] for x in train(energy, steps=2)]
        out(times)
    """)
    # The loop's own work is 0.3 s a step; pipeline 2 adds 2 x 0.25 s.
    assert all(t < 0.3 + 0.25 for t in r["0"]), r
    assert all(t >= 0.3 + 0.5 for t in r["2"]), r
    assert "pipeline 2 starts each iteration 500 ms late (the plan's offset between pipelines, " \
           "250 ms each)" in stderr, stderr


def test_a_grid_plans_stop_ramp_steps_the_clocks_down_before_the_last_step(tmp_path):
    """grid.stop_ramp_s with last_iteration: once the steps left fit in the
    ramp, the clocks step down through the start ramp's clocks, the lowest
    held to the end; then the reset."""
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    plan = json.loads(path.read_text())
    plan["grid"] = {"hold_frequency": [0], "start_ramp_s": 0.001,
                    "start_ramp_frequencies": [600, 1005], "stop_ramp_s": 0.5}
    path.write_text(json.dumps(plan))
    r, stderr = run_child(tmp_path, f"""
        energy = jp.Energy("optimize", plan={str(path)!r}, microbatches=2, last_iteration=5)
        out(train(energy, steps=6))  # 0.3 s a step: the ramp begins at step 5 (0.3 s left)
    """)
    assert "ramping the job's stop: clocks step down over the last 1 iteration(s)" in stderr, stderr
    log = calls(tmp_path)
    locked = [c["args"]["max_mhz"] if c["function"] == "nvmlDeviceSetGpuLockedClocks" else 0
              for c in log]
    assert log[-1]["function"] == "nvmlDeviceResetGpuLockedClocks", log[-3:]
    # The last step under the stop ramp: F1's 1110 capped, B1 and the
    # step's end at the lowest clock, 600, held until the close's reset.
    # (Steps run back to back here, so a step end's reset coalesces with the
    # next step's first clock and does not show.)
    assert locked[-2] == 600 and 1110 not in locked[-4:], str(locked)
    with pytest.raises(ValueError, match="last_iteration is the last training step's number"):
        import joulepipe.pytorch as jp
        jp.Energy("measure", last_iteration=-1)


def test_optimize_applies_a_power_limit_plan_and_locks_no_clock(tmp_path):
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    plan = json.loads(path.read_text())
    plan["power_limits_w"] = [250]
    path.write_text(json.dumps(plan))
    config = dict(SIM, permissions={"clocks": False, "power_limit": True})
    r, stderr = run_child(tmp_path, f"""
        base = train(jp.Energy("measure"), microbatches=2)
        opt = train(jp.Energy("optimize", plan={str(path)!r}, microbatches=2), microbatches=2)
        out({{"base": base, "opt": opt}})
    """, config=config)
    log = calls(tmp_path)
    limits = [c["args"]["limit_mw"] for c in log
              if c["function"] == "nvmlDeviceSetPowerManagementLimit"]
    # The permission probe (the default limit, while none is set), the plan's
    # limit set once, then the default back.
    assert limits == [400000, 250000, 400000], log
    assert not any(c["function"] == "nvmlDeviceSetGpuLockedClocks" for c in log)
    assert all(x["plan_version"] == 1 for x in r["opt"])
    # The simulated GPU caps its clock by power: less energy per second.
    per_s = lambda xs: sum(x["energy_j"] for x in xs) / sum(x["time_s"] for x in xs)  # noqa
    assert per_s(r["opt"]) < 0.95 * per_s(r["base"])
    assert "power-limit plan" in stderr and "250 W, default clocks" in stderr, stderr


def test_a_plan_that_does_not_fit_logs_one_line_and_training_goes_on(tmp_path):
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    r, stderr = run_child(tmp_path, f"""
        e = jp.Energy("optimize", plan={str(path)!r}, microbatches=3)
        records = train(e, steps=3, microbatches=3)
        out({{"records": records, "failure": e.failure}})
    """)
    assert len(r["records"]) == 3
    assert "is for 1f1b with 2 microbatches" in r["failure"]
    assert stderr.count("training goes on") == 1, stderr
    assert not any(c["function"] == "nvmlDeviceSetGpuLockedClocks" and c["result"] == 0
                   and c["args"]["max_mhz"] != 1410 for c in calls(tmp_path)[1:])


def test_missing_plan_file_and_bad_options(tmp_path):
    r, stderr = run_child(tmp_path, """
        e = jp.Energy("optimize", plan="no-such-plan.json", microbatches=2)
        records = train(e, steps=2)
        errors = []
        for bad in ({"mode": "fast"}, {"pp": 0}, {"colour": "red"}):
            mode = bad.pop("mode", "measure")
            try:
                jp.Energy(mode, **bad)
            except (ValueError, TypeError) as error:
                errors.append(str(error))
        out({"failure": e.failure, "steps": len(records), "errors": errors})
    """)
    assert "no-such-plan.json" in r["failure"] and r["steps"] == 2
    assert "mode must be one of measure, profile, optimize" in r["errors"][0]
    assert "pp must be" in r["errors"][1]
    assert "unknown option(s) colour" in r["errors"][2]


# ---- the example under torchrun ---------------------------------------------------------


def torchrun(tmp_path, *args, timeout=240):
    runner = shutil.which("torchrun") or None
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", str(EXAMPLE), "--timeout-s", "60",
        "--iterations", "12", *map(str, args)]
    env = sim_env(tmp_path)
    env["PATH"] = f"{CLI.parent}:{env.get('PATH', '')}"
    # A rank that aborts (SIGABRT) prints every thread's Python stack.
    env["PYTHONFAULTHANDLER"] = "1"
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def test_example_measure_prints_energy_per_iteration(tmp_path):
    out = torchrun(tmp_path, "--joulepipe", "measure")
    for rank in (0, 1):
        lines = [l for l in out.splitlines() if l.startswith(f"[rank {rank}] joulepipe: iteration")]
        assert len(lines) == 12, out
        assert "J/iter/GPU" in lines[-1] and "W/GPU" in lines[-1]
    assert "loss" in out
    assert calls(tmp_path) == []


def test_example_power_traces_join_into_the_jobs(tmp_path):
    """Issue 45, item 1: each rank records its GPU's power with its step
    ends; `joulepipe power --join` aligns the ranks on those and sums them
    into the job's power, with what the grid sees of it."""
    out = torchrun(tmp_path, "--joulepipe", "measure", "--power-trace",
                   tmp_path / "power.{rank}.json", "--power-trace-s", "30")
    for rank in (0, 1):
        assert f"power trace written to {tmp_path}/power.{rank}.json" in out, out
    assert "the job's power: joulepipe power --join" in out, out
    traces = [json.loads((tmp_path / f"power.{r}.json").read_text()) for r in (0, 1)]
    for rank, t in enumerate(traces):
        assert t["kind"] == "power_trace" and t["rank"] == rank and t["interval_s"] == 0.01
        assert [i for i, _ in t["step_ends"]] == list(range(12)), t["step_ends"]
        assert len(t["samples"]) >= 5
    joined = subprocess.run(
        [str(CLI), "power", "--join", tmp_path / "power.1.json", tmp_path / "power.0.json",
         "--csv", tmp_path / "job.csv"], capture_output=True, text=True, timeout=60)
    assert joined.returncode == 0, joined.stderr
    assert "Joined 2 ranks' power traces" in joined.stdout, joined.stdout
    assert "from rank 0's (median over 12 common step ends)" in joined.stdout, joined.stdout
    # The simulated library recorded them: said, never "measured" (issue 56, 5).
    assert all(t.get("simulated") is True for t in traces), traces[0].keys()
    assert "every figure below is simulated, not measured" in joined.stdout, joined.stdout
    assert "Grid (the job's joined power, simulated): peak" in joined.stdout, joined.stdout
    rows = (tmp_path / "job.csv").read_text().splitlines()
    assert rows[0] == "time_s,total_w,rank0_w,rank1_w", rows[0]
    for row in rows[1:]:
        _, total, w0, w1 = map(float, row.split(","))
        assert abs(total - (w0 + w1)) < 0.01, row
    # Nothing is replaced without being asked: the CSV, and a trace file.
    again = subprocess.run(
        [str(CLI), "power", "--join", tmp_path / "power.0.json", tmp_path / "power.1.json",
         "--csv", tmp_path / "job.csv"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "exists; pass --force" in again.stderr, again.stderr
    r, _ = run_child(tmp_path, f"""
        try:
            jp.Energy("measure", power_trace={str(tmp_path / "power.0.json")!r})
            out("accepted")
        except ValueError as error:
            out(str(error))
    """)
    assert "power_trace: " in r and "exists; joulepipe does not replace it" in r, r


def test_a_power_trace_over_before_training_ends_is_written_then(tmp_path):
    """power_trace_s shorter than training: the trace stops by itself, is
    written off the training thread, and only the step ends inside it are
    marked."""
    r, stderr = run_child(tmp_path, """
        energy = jp.Energy("measure", microbatches=2, power_trace="trace.json",
                           power_trace_ms=20, power_trace_s=1.0)
        train(energy, steps=6)  # 0.3 s a step: 1.8 s
        out(open("trace.json").read())
    """)
    trace = json.loads(r)
    assert 0 < len(trace["samples"]) <= 51, len(trace["samples"])
    ends = [i for i, _ in trace["step_ends"]]
    assert 1 <= len(ends) < 6 and ends == list(range(len(ends))), ends
    assert "power trace written to trace.json" in stderr, stderr


def test_example_profile_then_plan_then_optimize(tmp_path):
    # Wide layers: each instruction is milliseconds of CPU work. A CPU shared
    # with other work can still time a row implausibly; the profile is
    # measured in the job, so `plan` leaves such a row out (and says so)
    # instead of refusing the profile: one profile is enough.
    out = torchrun(tmp_path, "--joulepipe", "profile", "--profile-out",
                   tmp_path / "prof.csv", "--iterations", "30", "--width", "1024")
    profile = (tmp_path / "prof.csv").read_text()
    assert "# source: measured" in profile and "# p_block_w:" in profile, out
    assert "profile written to" in out
    (tmp_path / "calls.jsonl").unlink()
    planned = subprocess.run(
        [str(CLI), "plan", "--profile", tmp_path / "prof.csv", "--schedule", "1f1b",
         "--stages", "2", "--microbatches", "4", "--out", tmp_path / "plan"],
        capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr
    chosen = json.loads((tmp_path / "plan" / "chosen.json").read_text())

    out = torchrun(tmp_path, "--joulepipe", "optimize", "--plan", tmp_path / "plan",
                   "--width", "1024", "--power-trace", tmp_path / "power.{rank}.json")
    assert out.count("applied to stage") == 2, out
    # Issue 56, item 3, per rank: the iteration lines of the plan's run say
    # the power the same run's trace recorded between the same step ends
    # (energy over time of steps 1-11 against the trace's mean there).
    line = re.compile(r"iteration (\d+) \| rank (\d) \| ([\d.]+) ms \| ([\d.]+) J/iter/GPU "
                      r"\(sampled(?:, approx\.)?\) \| [\d.]+ W/GPU")
    for rank in (0, 1):
        steps = {int(m.group(1)): (float(m.group(3)) * 1e-3, float(m.group(4)))
                 for m in line.finditer(out) if int(m.group(2)) == rank}
        assert sorted(steps) == list(range(12)), out
        trace = json.loads((tmp_path / f"power.{rank}.json").read_text())
        ends = dict(trace["step_ends"])
        traced = [w for t, w in trace["samples"] if ends[0] < t <= ends[11]]
        lines_w = (sum(steps[i][1] for i in range(1, 12)) /
                   sum(steps[i][0] for i in range(1, 12)))
        assert abs(lines_w / (sum(traced) / len(traced)) - 1) <= 0.05, (rank, lines_w, traced)
    log = calls(tmp_path)
    pids = sorted({c["pid"] for c in log})
    assert len(pids) == 2
    by_stage = {}
    for pid in pids:
        mine = [c for c in log if c["pid"] == pid]
        locked = [c["args"]["max_mhz"] for c in mine
                  if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
        by_stage[mine[0]["device"]] = locked
        assert mine[-1]["function"] == "nvmlDeviceResetGpuLockedClocks"
    for stage in (0, 1):
        planned = [i["frequency"] for i in chosen["stages"][stage]]
        # The agent skips a request for the clock already set (runs collapse),
        # and the controller coalesces a request overtaken by the next one
        # (instructions of a few ms here): what was set is the planned
        # sequence in order, possibly with some entries left out.
        # Each step starts from default clocks (its end gave them back), so
        # its first clock is locked again even when the last step ended on it.
        per_step = [f for i, f in enumerate(planned) if i == 0 or f != planned[i - 1]]
        expected = per_step * 12
        got = by_stage[stage]
        assert set(got) == set(planned), (stage, got, planned)
        it = iter(expected)
        assert all(f in it for f in got), (stage, got, expected)  # a subsequence
        assert len(got) >= len(expected) // 2, (stage, got, expected)


def test_profile_mode_says_what_it_will_not_do(tmp_path):
    """Issue 40, 5: profile mode without profile_out said nothing about not
    writing the profile, and a sweep still running at the end left no word."""
    r, stderr = run_child(tmp_path, """
        lines = []
        train(jp.Energy("profile", microbatches=2, log=lines.append), steps=2)
        out(lines)
    """)
    text = "\n".join(r)
    assert "profile mode without profile_out: the measured profile is planned" in text, text
    assert "the profile sweep of stage 0 had not finished when the job ended (2 iterations ran" \
        in text, text
    assert "no profile was written and nothing was planned; it needed at least" in text, text
    # The start says how long the sweep takes; the end, how much was left:
    # 2 iterations ran, so the fewest needed is the start's figure.
    start = re.search(r"the sweep takes (\d+) iterations, up to (\d+)", text)
    assert start and int(start[1]) < int(start[2]), text
    assert f"run at least {start[1]} iterations" in text, text


def test_an_exception_inside_a_backward_is_named_as_one(tmp_path):
    """Issue 56, 5: an exception inside a backward was reported as "step ended
    after 3 of 4 planned instructions (plan expected ...)"; it is an
    exception, and the line says which."""
    path = plan_file(tmp_path, [1005, 900, 1110, 855])
    r, stderr = run_child(tmp_path, f"""
        energy = jp.Energy("optimize", plan={str(path)!r}, microbatches=2)
        with energy.step():
            for mb in range(2):
                with energy.forward(mb):
                    time.sleep(0.01)
                with energy.backward(mb):
                    time.sleep(0.01)
        try:
            with energy.step():
                with energy.forward(0):
                    pass
                with energy.backward(0):
                    raise RuntimeError("CUDA out of memory (a stand-in)")
        except RuntimeError:
            pass
        failure = energy.failure
        energy.close()
        out(failure)
    """)
    assert r.startswith("an exception ended step 1 early (RuntimeError: CUDA out of memory (a "
                        "stand-in))"), r
    assert "planned instructions" not in stderr, stderr
    assert "the simulated NVML library" in stderr, stderr  # the session says where figures come from


def test_rank_0_says_when_another_ranks_sweep_kept_the_job_from_its_profile(tmp_path):
    """Issue 56, 4: rank 0 writes the job's profile once every rank's sweep is
    done; a job that ended before then left rank 0 silent (its own sweep had
    finished) and no file. Another rank's sweep is stood in for by its row
    in the rounds (RoundRow.sweep_iterations_left: the iterations it still
    needs)."""
    r, _ = run_child(tmp_path, """
        from joulepipe import _core
        lines = []
        class TwoRanks:
            def all_gather_rows(self, row):
                mine = _core.RoundRow.from_floats(row)
                other = _core.RoundRow(iteration=mine.iteration,
                                       pipeline_time_s=mine.pipeline_time_s,
                                       sweep_iterations_left=30)
                return [list(row), other.to_floats()]
            def all_gather_object(self, obj):
                return [obj, obj]
            def broadcast_object(self, obj):
                return obj
            def close(self):
                pass
        energy = jp.Energy("profile", microbatches=2, log=lines.append, profile_out="prof.csv",
                           profile_stride_mhz=180)
        energy._session._link.exchange = TwoRanks()
        train(energy, steps=12)  # this rank's sweep of 4 clocks ends; the other's does not
        out(lines)
    """)
    text = "\n".join(r)
    assert "had not finished" not in text, text  # this rank's own sweep did
    assert ("the job ended before every rank finished its profile sweep (rank 1 had not; 12 "
            "iterations ran): no profile was written to prof.csv and nothing was planned; run "
            "at least 41 iterations") in text, text
    assert not (tmp_path / "prof.csv").exists()


def test_an_unfinished_sweep_keeps_what_it_measured_and_says_its_progress(tmp_path):
    """Issue 40, 3 and 5: a progress line during the sweep, and with
    profile_out a sweep cut short leaves what it measured beside it (never
    in the profile_out file itself, which stays absent: it is no profile)."""
    r, _ = run_child(tmp_path, """
        lines = []
        energy = jp.Energy("profile", microbatches=2, log=lines.append, profile_out="prof.csv")
        energy._session.SWEEP_PROGRESS_EVERY = 2  # a line every 10 iterations in real jobs
        train(energy, steps=4)  # a sweep of 38 clocks: far from done
        out(lines)
    """)
    text = "\n".join(r)
    assert "profiling stage 0: 2 iterations so far; the sweep visits up to 38 clocks" in text, text
    partial = tmp_path / "prof.stage0.partial.csv"
    assert f"the clocks this rank measured so far are in prof.stage0.partial.csv" in text, text
    assert not (tmp_path / "prof.csv").exists()
    rows = [l for l in partial.read_text().splitlines() if l and not l.startswith("#")]
    assert rows[0].startswith("stage,instruction,frequency,time,energy"), rows
    # At least one clock of each kind (the throttled GPU ran the first few
    # requests at one clock: one row each).
    assert len(rows) >= 3 and all(l.startswith("0,") for l in rows[1:]), rows


def test_profile_mode_logs_the_predicted_saving(tmp_path):
    """Issue 40, 5: the saving docs/python.md promises profile mode logs."""
    r, _ = run_child(tmp_path, """
        lines = []
        energy = jp.Energy("profile", microbatches=2, log=lines.append, profile_stride_mhz=150,
                           profile_out="profile.csv")
        for step in range(24):  # waits between instructions: the profile's P_block
            with energy.step():
                for mb in range(2):
                    with energy.forward(mb):
                        time.sleep(0.02)
                    time.sleep(0.03)
                    with energy.backward(mb):
                        time.sleep(0.04)
                    time.sleep(0.03)
        energy.close()
        out(lines)
    """)
    ready = [l for l in r if "ready (not applied in profile mode)" in l]
    assert len(ready) == 1, "\n".join(r)
    assert "predicted saving" in ready[0] and "% of GPU energy per iteration" in ready[0], ready
    assert (tmp_path / "profile.csv").exists()


def test_a_job_without_waits_plans_with_the_catalogues_p_block(tmp_path):
    """Issue 40, 3: a loop of one stage has no bubbles, so no wait measures
    P_block; planning failed naming PlanRequest::p_block_w and a job id the
    user never saw. It now plans with the catalogue's figure for the GPU,
    and says so. (On a loaded machine a descheduled host can leave a gap
    long enough to measure P_block: then the profile carries it, and the
    catalogue's figure is neither used nor said.)"""
    r, _ = run_child(tmp_path, """
        lines = []
        energy = jp.Energy("profile", microbatches=2, log=lines.append, profile_stride_mhz=150,
                           profile_out="prof.csv")
        train(energy, steps=14)
        out(lines)
    """)
    text = "\n".join(r)
    catalogue = "planning with 83.64 W, the catalogue's figure for NVIDIA A100-SXM4-80GB"
    measured = "p_block_w" in (tmp_path / "prof.csv").read_text()
    assert (catalogue in text) != measured, text
    assert "planning failed" not in text and "PlanRequest::" not in text, text
    assert any("ready (not applied in profile mode)" in l for l in r), text


def test_a_throttled_gpu_is_profiled_at_the_clocks_it_runs(tmp_path):
    """Issue 40, 6: under examples/pytorch/sim-gpu.json's load every lock at
    or above 1290 MHz runs at 1275 MHz (its power cap). The sweep recorded
    them as distinct rows and plans asked for clocks the GPU never ran. The
    rows are now the clocks that ran, and the log says what was asked."""
    config = json.loads((REPO / "examples" / "pytorch" / "sim-gpu.json").read_text())
    config["count"] = 1
    r, _ = run_child(tmp_path, """
        lines = []
        energy = jp.Energy("profile", microbatches=2, log=lines.append, profile_stride_mhz=45,
                           profile_out="prof.csv")
        for step in range(30):
            with energy.step():
                for mb in range(2):
                    with energy.forward(mb):
                        time.sleep(0.01)
                    time.sleep(0.003)
                    with energy.backward(mb):
                        time.sleep(0.02)
        energy.close()
        out(lines)
    """, config=config)
    text = "\n".join(r)
    assert "requested, the GPU ran 1275 MHz (throttled by its power or thermal cap)" in text, text
    rows = [l.split(",") for l in (tmp_path / "prof.csv").read_text().splitlines()
            if l and l[0].isdigit()]
    clocks = sorted({int(row[2]) for row in rows}, reverse=True)
    assert clocks[0] == 1275, clocks  # requested 1410, 1365, 1320 ... ran 1275
    assert len(clocks) >= 2, clocks

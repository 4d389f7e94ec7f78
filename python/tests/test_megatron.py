"""joulepipe.megatron on the real stack: unmodified megatron-core 0.16.1
pipeline schedules (a tiny GPT, examples/megatron/train_tiny_gpt.py) under
torchrun on the CPU, with the simulated NVML library.

* the hooks fire in exactly the order `joulepipe plan` plans, for no
  pipelining, PP = 2 1F1B and PP = 2 x VP = 2 interleaved;
* measure: energy per iteration against the simulated counter;
* optimize with a plan directory: the call log shows each rank's planned
  clock sequence, evaluation (forward_only) passes leave the plan intact,
  and the losses are bit-identical with and without joulepipe;
* the launcher (`-m joulepipe.megatron.run`) strips its own flags.

Every torchrun has a timeout and gloo its own (--timeout-s), so a hang
fails fast.
"""

import json
import re
import shutil
import subprocess
import sys

import pytest

from build_paths import CLI, REPO, package_built, python_env

if not package_built():
    pytest.skip("joulepipe._core not built (pip install pybind11; cmake --build build)",
                allow_module_level=True)
pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")
pytest.importorskip("megatron.core", reason="megatron-core is not installed "
                                            "(scripts/install-deps installs 0.16.1)")

EXAMPLE = REPO / "examples" / "megatron" / "train_tiny_gpt.py"
SIM = {"gpu": "a100-sxm4-80gb", "count": 2, "power_reading": "instant",
       "energy_update_period_ms": 100, "permissions": {"clocks": True},
       "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0, "compute_fraction": 0.8}]}
LAYOUTS = {"none": ["--pp", "1"], "1f1b": ["--pp", "2"], "interleaved": ["--pp", "2", "--vp", "2"]}


def env_for(tmp_path):
    path = tmp_path / "sim-nvml.json"
    path.write_text(json.dumps(dict(SIM, call_log=str(tmp_path / "calls.jsonl"))))
    env = python_env(path)
    env["OMP_NUM_THREADS"] = "1"  # bit-identical losses between runs
    env["PYTHONWARNINGS"] = "ignore"
    return env


def torchrun(tmp_path, *args, module=False, timeout=300):
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2"]
    cmd += (["-m", "joulepipe.megatron.run"] if module else []) + [str(a) for a in args]
    proc = subprocess.run(cmd, env=env_for(tmp_path), capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def example(tmp_path, layout, *args, log="log.jsonl"):
    return torchrun(tmp_path, EXAMPLE, *LAYOUTS[layout], "--timeout-s", "60",
                    "--log-json", tmp_path / log, *args)


def records(tmp_path, log="log.jsonl"):
    return [json.loads(l) for l in (tmp_path / log).read_text().splitlines()]


def plan_for(tmp_path, layout):
    """`joulepipe plan` for the example's shape (4 microbatches) on a
    simulated profile of as many stages."""
    stages = 1 if layout == "none" else 2
    profile = tmp_path / f"p{stages}.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", str(stages), "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    out = tmp_path / f"plan-{layout}"
    cmd = [str(CLI), "plan", "--profile", str(profile), "--stages", str(stages),
           "--microbatches", "4", "--out", str(out)]
    cmd += ["--schedule", "interleaved", "--chunks", "2"] if layout == "interleaved" else [
        "--schedule", "1f1b"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out, json.loads((out / "chosen.json").read_text())


@pytest.mark.parametrize("layout", ["none", "1f1b", "interleaved"])
def test_hooks_fire_in_the_planned_order(tmp_path, layout):
    example(tmp_path, layout, "--iterations", "2", "--joulepipe", "measure")
    _, chosen = plan_for(tmp_path, layout)
    orders = {r["rank"]: (r["pp_rank"], r["order"]) for r in records(tmp_path)
              if r["kind"] == "order"}
    assert sorted(orders) == [0, 1]
    for rank, (stage, order) in orders.items():
        planned = [[i["instruction"], i["microbatch"], i["chunk"]] for i in chosen["stages"][stage]]
        assert order == planned, (layout, rank)


def test_measure_energy_per_iteration_matches_the_counter(tmp_path):
    out = example(tmp_path, "1f1b", "--iterations", "6", "--joulepipe", "measure",
                  "--joulepipe-log", tmp_path / "energy-{rank}.jsonl")
    # The simulated power itself, read through pynvml in one process: under
    # a constant load the counter's energy over a window is P x its length,
    # within one 100 ms counter update at each end.
    read = subprocess.run([sys.executable, "-c", "import pynvml as n; n.nvmlInit(); print("
                           "n.nvmlDeviceGetPowerUsage(n.nvmlDeviceGetHandleByIndex(0)) / 1000)"],
                          env=env_for(tmp_path), capture_output=True, text=True, timeout=60)
    power_w = float(read.stdout)
    assert 100 < power_w < 500
    for rank in (0, 1):
        rows = [json.loads(l) for l in (tmp_path / f"energy-{rank}.jsonl").read_text().splitlines()]
        assert [r["iteration"] for r in rows] == list(range(6))
        for r in rows:
            assert r["energy_j"] == pytest.approx(power_w * r["time_s"], abs=2 * 0.1 * power_w)
            assert r["tokens_per_s"] == pytest.approx(256 / r["time_s"])  # 4 x 2 x 32 tokens
        lines = [l for l in out.splitlines() if l.startswith(f"[rank {rank}] joulepipe: iteration")]
        assert len(lines) == 6 and "J/iter/GPU" in lines[0] and "tokens/s" in lines[0]
    assert not (tmp_path / "calls.jsonl").exists()  # measure never sets a clock


@pytest.mark.parametrize("layout", ["1f1b", "interleaved"])
def test_optimize_applies_the_plan_and_keeps_the_losses(tmp_path, layout):
    plan_dir, chosen = plan_for(tmp_path, layout)
    example(tmp_path, layout, "--iterations", "4", "--eval-every", "2", "--joulepipe", "off",
            log="off.jsonl")
    out = example(tmp_path, layout, "--iterations", "4", "--eval-every", "2",
                  "--joulepipe", "optimize", "--joulepipe-plan", plan_dir, log="on.jsonl")
    assert out.count("applied to stage") == 2, out
    assert "default clocks" not in out, out  # no fallback, evaluation passes included

    def losses(log):
        return sorted((r["rank"], r["iteration"], r["kind"], r["loss"] or 0.0)
                      for r in records(tmp_path, log) if r["kind"] in ("train", "eval"))

    assert losses("on.jsonl") == losses("off.jsonl")  # bit for bit
    assert len(losses("on.jsonl")) == 2 * (4 + 2)  # 4 iterations, 2 evaluations, 2 ranks
    log = [json.loads(l) for l in (tmp_path / "calls.jsonl").read_text().splitlines()]
    for device in (0, 1):
        mine = [c for c in log if c["device"] == device]
        locked = [c["args"]["max_mhz"] for c in mine
                  if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
        planned = [i["frequency"] for i in chosen["stages"][device]]
        # Skipped when already set, coalesced when overtaken: the planned
        # sequence in order, some entries possibly left out. Each iteration
        # starts from default clocks (its end gave them back), so its first
        # clock is locked again even when the last iteration ended on it.
        per_iteration = [f for i, f in enumerate(planned) if i == 0 or f != planned[i - 1]]
        expected = per_iteration * 4
        it = iter(expected)
        # A clock can be coalesced away in every iteration on a loaded machine
        # (ci-under-load: 1275 MHz never locked), so the planned clocks
        # bound the locked ones, which must be most of them, in order.
        assert locked and set(locked) <= set(planned), (device, locked)
        assert len(set(locked)) >= len(set(planned)) - 1, (device, locked)
        assert all(f in it for f in locked), (device, locked)
        assert mine[-1]["function"] == "nvmlDeviceResetGpuLockedClocks"


def test_the_launcher_runs_an_unmodified_script(tmp_path):
    """`-m joulepipe.megatron.run --joulepipe measure -- script <its args>`:
    the script's parser never sees joulepipe's flags, and the hooks are in
    before it starts (the script itself is left at --joulepipe off)."""
    out = torchrun(tmp_path, "--joulepipe", "measure", "--", EXAMPLE, "--pp", "2",
                   "--iterations", "3", "--timeout-s", "60", module=True)
    lines = [l for l in out.splitlines() if "joulepipe: iteration" in l]
    assert len(lines) == 2 * 3, out
    assert "J/iter/GPU" in lines[0]


# ---- through joulepiped, and a rank killed mid-run --------------------------------------


def start_daemon(tmp_path):
    """joulepiped on the simulated library with clock permission (the job's
    own NVML view has none): its call log is the GPUs' truth."""
    from build_paths import BUILD
    import time

    cfg = tmp_path / "daemon-sim.json"
    cfg.write_text(json.dumps(dict(SIM, call_log=str(tmp_path / "daemon-calls.jsonl"))))
    (tmp_path / "jp.json").write_text("{}")
    env = python_env(cfg)
    env["JOULEPIPE_NVML_LIBRARY"] = str(BUILD / "sim-nvml" / "libnvidia-ml.so.1")
    socket = tmp_path / "jp.sock"
    daemon = subprocess.Popen([str(BUILD / "joulepiped"), "--config", str(tmp_path / "jp.json"),
                               "--socket", str(socket), "--audit-log",
                               str(tmp_path / "audit.log")], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not socket.exists():
        assert daemon.poll() is None, daemon.stderr.read()
        assert time.monotonic() < deadline, "joulepiped did not start"
        time.sleep(0.05)
    return daemon, socket


def daemon_calls(tmp_path):
    path = tmp_path / "daemon-calls.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def test_killing_a_rank_mid_run_leaves_its_gpu_at_default_clocks(tmp_path):
    """optimize through joulepiped (the job itself has no clock permission);
    SIGKILL one rank while it runs planned clocks: the daemon restores its
    GPU (and torchrun takes the other rank down, whose GPU is restored too)."""
    import os
    import signal
    import time

    plan_dir, chosen = plan_for(tmp_path, "1f1b")
    daemon, socket = start_daemon(tmp_path)
    job_sim = tmp_path / "job-sim.json"
    job_sim.write_text(json.dumps({k: v for k, v in SIM.items() if k != "permissions"}))
    env = python_env(job_sim)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", str(EXAMPLE), "--pp", "2", "--timeout-s", "30",
        "--iterations", "100000", "--joulepipe", "optimize", "--joulepipe-plan", str(plan_dir),
        "--joulepipe-control", "daemon", "--joulepipe-daemon-socket", str(socket)]
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # both GPUs running planned clocks through the daemon
            locked = {c["device"] for c in daemon_calls(tmp_path)
                      if c["function"] == "nvmlDeviceSetGpuLockedClocks"}
            if locked == {0, 1}:
                break
            assert job.poll() is None, job.stdout.read()
            assert time.monotonic() < deadline, "no planned clock reached the daemon"
            time.sleep(0.1)
        workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(job.pid)],
                                                  capture_output=True, text=True).stdout.split()]
        victim = next(p for p in workers
                      if b"LOCAL_RANK=1\0" in open(f"/proc/{p}/environ", "rb").read() + b"\0")
        before = len(daemon_calls(tmp_path))
        os.kill(victim, signal.SIGKILL)
        job.wait(timeout=120)
        time.sleep(0.5)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
    after = daemon_calls(tmp_path)[before:]
    resets = {c["device"] for c in after if c["function"] == "nvmlDeviceResetGpuLockedClocks"
              and c["result"] == 0}
    # Each step ends at default clocks, so a rank killed between steps left
    # nothing to restore: assert the state each GPU ends in, not a race.
    assert resets <= {0, 1}, after
    for device in (0, 1):
        last = [c for c in daemon_calls(tmp_path) if c["device"] == device][-1]
        assert last["function"] == "nvmlDeviceResetGpuLockedClocks", last
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0


def test_optimize_with_joulepipe_serve(tmp_path):
    """--joulepipe-coordinator: rank 0 registers the job and uploads the
    profile through the runtime's client; serve plans; every rank registers
    itself, fetches its plan (CoordinatedPlan) and runs its clocks."""
    from coord_server import Server

    stages_profile = tmp_path / "p2.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", "2", "--out", str(stages_profile)],
                   check=True, capture_output=True, timeout=60)
    server = Server("--db", str(tmp_path / "state.sqlite"))
    try:
        out = example(tmp_path, "1f1b", "--iterations", "12", "--joulepipe", "optimize",
                      "--joulepipe-coordinator", server.url, "--joulepipe-profile",
                      stages_profile, "--joulepipe-job-id", "tiny-gpt")
        assert "job tiny-gpt registered at" in out, out
        for rank in (0, 1):
            # The state, not the race: a rank that had its plan before its
            # first iteration says "running", one that got it later
            # "switching to".
            assert re.search(rf"\[rank {rank}\] joulepipe \[rank {rank}\]: (switching to|running) "
                             rf"plan version 1 for rank {rank}\b", out), out
        plans = {}
        for rank in (0, 1):
            status, plan = server.request("GET", f"/jobs/tiny-gpt/plan?rank={rank}&after=0")
            assert status == 200, plan
            plans[rank] = [i["frequency"] for i in plan["instructions"]]
    finally:
        server.stop()
    log = [json.loads(l) for l in (tmp_path / "calls.jsonl").read_text().splitlines()]
    for device in (0, 1):
        locked = [c["args"]["max_mhz"] for c in log if c["device"] == device
                  and c["function"] == "nvmlDeviceSetGpuLockedClocks"]
        assert locked and set(locked) <= set(plans[device]), (device, locked, plans[device])


# ---- every way out gives the clocks back (issue 40, findings 1 and 3) ----------------


def last_calls(tmp_path, devices=(0, 1)):
    log = [json.loads(l) for l in (tmp_path / "calls.jsonl").read_text().splitlines()]
    return log, {d: [c for c in log if c["device"] == d][-1]["function"] for d in devices}


def test_embedded_optimize_leaving_like_exit_interval_gives_the_clocks_back(tmp_path):
    """enable("optimize") with no plan (profile, plan on rank 0, run), and the
    job leaves by sys.exit() after iteration 12 as Megatron-LM's
    --exit-interval does: no disable(), no teardown. Both GPUs end reset."""
    out = example(tmp_path, "1f1b", "--iterations", "1000", "--exit-interval", "12",
                  "--eval-every", "3", "--joulepipe", "optimize")
    # The exit guard and enable's atexit hook both close the session: its
    # closing lines are said once per rank.
    assert out.count("coordination took") == 2, out[-3000:]
    log, last = last_calls(tmp_path)
    assert any(c["function"] == "nvmlDeviceSetGpuLockedClocks" for c in log)
    assert last == {0: "nvmlDeviceResetGpuLockedClocks", 1: "nvmlDeviceResetGpuLockedClocks"}


def test_sigterm_to_torchrun_gives_the_clocks_back(tmp_path):
    """optimize with a plan through NVML directly (no joulepiped): SIGTERM to
    torchrun, as SLURM sends it, while both GPUs run planned clocks."""
    import os
    import signal
    import time

    plan_dir, _ = plan_for(tmp_path, "1f1b")
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", str(EXAMPLE), "--pp", "2", "--timeout-s", "30",
        "--iterations", "100000", "--joulepipe", "optimize", "--joulepipe-plan", str(plan_dir)]
    job = subprocess.Popen(cmd, env=env_for(tmp_path), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True,
                           cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        calls_path = tmp_path / "calls.jsonl"
        while True:
            locked = set()
            if calls_path.exists():
                locked = {json.loads(l)["device"] for l in calls_path.read_text().splitlines()
                          if "SetGpuLockedClocks" in l}
            if locked == {0, 1}:
                break
            assert job.poll() is None, job.stdout.read()
            assert time.monotonic() < deadline, "no planned clock was set"
            time.sleep(0.1)
        job.send_signal(signal.SIGTERM)
        out, _ = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
    _, last = last_calls(tmp_path)
    assert last == {0: "nvmlDeviceResetGpuLockedClocks", 1: "nvmlDeviceResetGpuLockedClocks"}, out
    assert "SIGTERM received" in out, out


def test_cpu_emulation_needs_no_pynvml(tmp_path):
    """--emulate-kernel-ms (docs/megatron.md) after `pip install .` alone:
    the example reads the clock through joulepipe, not pynvml (issue 40, 7)."""
    code = ("import sys, time; sys.modules['pynvml'] = None; "
            f"sys.path.insert(0, {str(EXAMPLE.parent)!r}); import cpu_shims; "
            "k = cpu_shims.EmulatedKernels(0); t = time.perf_counter(); k.wait(20); "
            "print(time.perf_counter() - t)")
    proc = subprocess.run([sys.executable, "-c", code], env=env_for(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 0.015 < float(proc.stdout) < 2, proc.stdout  # 20 ms at the max clock, x max/current


# ---- as Megatron-LM's train() runs it (issue 43) --------------------------------------------


def megatron_lm_loop(tmp_path, *args):
    """The example under torchrun as Megatron-LM's train() drives it, with the
    megatron.training stand-in on the path (megatron_lm_loop.py)."""
    from build_paths import PYTHON_DIR

    standin = REPO / "python" / "tests" / "megatron_lm_standin"
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", REPO / "python" / "tests" / "megatron_lm_loop.py",
        "--pp", "2", "--timeout-s", "60", *args]
    env = env_for(tmp_path)
    env["PYTHONPATH"] = f"{standin}:{PYTHON_DIR}:{env.get('PYTHONPATH', '')}"
    proc = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def test_megatron_lm_numbering_log_interval_rampup_and_tensorboard(tmp_path):
    """A resumed run (Megatron's curr_iteration from 5) with --log-interval 2
    and a batch-size rampup of 2 then 4 microbatches: joulepipe's iterations
    are Megatron's 6..9, a line every second iteration carrying its rank,
    tokens/s from each iteration's own batch, and TensorBoard scalars under
    joulepipe's own tags at Megatron's steps; the log appended to."""
    log = tmp_path / "energy-{rank}.jsonl"
    (tmp_path / "energy-0.jsonl").write_text('{"iteration": 5, "from": "the run before"}\n')
    out = megatron_lm_loop(tmp_path, "--resume-at", "5", "--log-interval", "2", "--rampup", "2",
                           "--scalars", tmp_path / "scalars-{rank}.jsonl", "--iterations", "4",
                           "--joulepipe", "measure", "--joulepipe-log", log)
    for rank in (0, 1):
        rows = [json.loads(l) for l in (tmp_path / f"energy-{rank}.jsonl").read_text().splitlines()]
        if rank == 0:
            assert rows[0] == {"iteration": 5, "from": "the run before"}  # appended, not truncated
            rows = rows[1:]
        assert [r["iteration"] for r in rows] == [6, 7, 8, 9]
        # 2 then 4 microbatches x 2 sequences x 32 tokens (dp 1).
        assert [round(r["tokens_per_s"] * r["time_s"]) for r in rows] == [128, 256, 256, 256]
        lines = [l for l in out.splitlines() if l.startswith(f"[rank {rank}] joulepipe: iteration")]
        assert [l.split("|")[0].split()[-1] for l in lines] == ["6", "8"], out
        assert all(f"| rank {rank} |" in l for l in lines), lines
        scalars = [json.loads(l) for l in
                   (tmp_path / f"scalars-{rank}.jsonl").read_text().splitlines()]
        assert {s["tag"] for s in scalars} == {"joulepipe/energy-per-gpu-j",
                                               "joulepipe/power-per-gpu-w",
                                               "joulepipe/plan-version"}
        assert sorted({s["step"] for s in scalars}) == [6, 7, 8, 9]


def test_a_plan_waits_for_the_batch_size_rampup_to_end(tmp_path):
    """Megatron-LM's --rampup-batch-size: the first iterations run 2
    microbatches, then the final 4 that the plan is for. Before, the plan was
    refused at the first iteration and never applied (0 clock changes for the
    whole run); now the small iterations run at default clocks, said once,
    and the plan applies from the first full one."""
    plan_dir, chosen = plan_for(tmp_path, "1f1b")
    out = megatron_lm_loop(tmp_path, "--rampup", "2,2", "--iterations", "5",
                           "--joulepipe", "optimize", "--joulepipe-plan", plan_dir,
                           "--joulepipe-log", tmp_path / "energy-{rank}.jsonl")
    assert out.count("such iterations run at default clocks") == 2, out  # once per rank
    assert "this rank runs at default clocks" not in out, out  # no fallback
    for rank in (0, 1):
        rows = [json.loads(l) for l in (tmp_path / f"energy-{rank}.jsonl").read_text().splitlines()]
        assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
        assert [r["plan_version"] for r in rows] == [0, 0, 1, 1, 1], rows
        assert all(r["clocks_applied"] == 0 for r in rows[:2]), rows
    log = [json.loads(l) for l in (tmp_path / "calls.jsonl").read_text().splitlines()]
    for device in (0, 1):
        locked = {c["args"]["max_mhz"] for c in log if c["device"] == device
                  and c["function"] == "nvmlDeviceSetGpuLockedClocks"}
        assert locked == {i["frequency"] for i in chosen["stages"][device]}, (device, locked)


def test_evaluations_and_checkpoints_are_reported_apart(tmp_path):
    """Evaluations (the example's, in jpm.phase) and checkpoint saves
    (Megatron-LM's save_checkpoint_and_time, wrapped at the first iteration)
    are measured apart from the iterations: a line each, a record in the
    .jsonl log, TensorBoard tags at the step of the iteration before. With
    --joulepipe-log-rank 1 only rank 1 writes lines; both ranks' logs get
    everything."""
    out = megatron_lm_loop(tmp_path, "--iterations", "4", "--eval-every", "2", "--save-every", "2",
                           "--scalars", tmp_path / "scalars-{rank}.jsonl",
                           "--joulepipe", "measure", "--joulepipe-log-rank", "1",
                           "--joulepipe-log", tmp_path / "energy-{rank}.jsonl")
    said = [l for l in out.splitlines() if " joulepipe: iteration " in l
            or " joulepipe: evaluation " in l or " joulepipe: checkpoint " in l]
    assert all(l.startswith("[rank 1] ") for l in said), said
    assert [l.split(" | ")[0].split("joulepipe: ")[1] for l in said] == [
        "iteration 1", "iteration 2", "evaluation after iteration 2",
        "checkpoint after iteration 2", "iteration 3", "iteration 4",
        "evaluation after iteration 4"], said
    for rank in (0, 1):
        rows = [json.loads(l) for l in (tmp_path / f"energy-{rank}.jsonl").read_text().splitlines()]
        assert [(r["kind"], r.get("iteration", r.get("after_iteration"))) for r in rows] == [
            ("iteration", 1), ("iteration", 2), ("evaluation", 2), ("checkpoint", 2),
            ("iteration", 3), ("iteration", 4), ("evaluation", 4)]
        save = rows[3]
        assert save["time_s"] >= 0.03 and save["energy_j"] > 0  # the stand-in sleeps 30 ms
        assert save["avg_power_w"] == pytest.approx(save["energy_j"] / save["time_s"])
        scalars = {(s["tag"], s["step"]) for s in map(
            json.loads, (tmp_path / f"scalars-{rank}.jsonl").read_text().splitlines())}
        assert {("joulepipe/evaluation-energy-per-gpu-j", 2), ("joulepipe/evaluation-time-s", 4),
                ("joulepipe/checkpoint-energy-per-gpu-j", 2),
                ("joulepipe/checkpoint-time-s", 2)} <= scalars, scalars


def test_power_traces_from_megatron_lm_join_into_the_jobs(tmp_path):
    """--joulepipe-power-trace: each rank's GPU power with Megatron-LM's
    iteration numbers as its step ends; `joulepipe power --join` aligns the
    two ranks on them."""
    out = megatron_lm_loop(tmp_path, "--iterations", "4", "--joulepipe", "measure",
                           "--joulepipe-power-trace", tmp_path / "power-{rank}.json")
    assert "power trace written to" in out, out
    for rank in (0, 1):
        trace = json.loads((tmp_path / f"power-{rank}.json").read_text())
        assert [i for i, _ in trace["step_ends"]] == [1, 2, 3, 4], trace["step_ends"]
    joined = subprocess.run([str(CLI), "power", "--join", tmp_path / "power-0.json",
                             tmp_path / "power-1.json"], capture_output=True, text=True,
                            timeout=60)
    assert joined.returncode == 0, joined.stderr
    assert "(median over 4 common step ends)" in joined.stdout, joined.stdout


def test_a_bad_phase_kind_or_log_rank_is_refused_with_its_name():
    import joulepipe.megatron as jpm

    with pytest.raises(ValueError, match="phase kind must be"):
        with jpm.phase("eval/loss"):  # would name a TensorBoard tag joulepipe/eval/loss-...
            pass
    with pytest.raises(ValueError, match=r"log_rank \(--joulepipe-log-rank\)"):
        jpm.enable("measure", log_rank=-1)
    with pytest.raises(ValueError, match="power_trace_ms is the sampling interval, 1..10000 ms"):
        jpm.enable("measure", power_trace="p.json", power_trace_ms=0)
    assert not jpm.enabled()
    with jpm.phase("evaluation"):  # joulepipe off: the body runs, nothing else
        ran = True
    assert ran


def test_a_plan_for_another_shape_is_refused_before_it_is_applied(tmp_path):
    """A plan file for 8 microbatches, a loop of 4: one line per rank says
    why the rank runs at default clocks. Before, each rank first said the
    plan was applied, then refused it, then logged "plan v1, 0 clock
    changes" every iteration and "executing a plan of 16 instructions"."""
    profile = tmp_path / "p2.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", "2", "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    subprocess.run([str(CLI), "plan", "--profile", str(profile), "--stages", "2", "--schedule",
                    "1f1b", "--microbatches", "8", "--out", str(tmp_path / "plan-8")],
                   check=True, capture_output=True, timeout=120)
    out = example(tmp_path, "1f1b", "--iterations", "3", "--joulepipe", "optimize",
                  "--joulepipe-plan", tmp_path / "plan-8",
                  "--joulepipe-log", tmp_path / "energy-{rank}.jsonl")
    assert out.count("is for 1f1b with 8 microbatches and 1 chunks; this loop runs 1f1b with "
                     "4 microbatches and 1 chunks; this rank runs at default clocks") == 2, out
    assert "applied to stage" not in out and "executing a plan" not in out, out
    for rank in (0, 1):
        rows = [json.loads(l) for l in (tmp_path / f"energy-{rank}.jsonl").read_text().splitlines()]
        assert [(r["plan_version"], r["clocks_applied"]) for r in rows] == [(0, 0)] * 3
    calls = tmp_path / "calls.jsonl"
    assert not calls.exists() or "SetGpuLockedClocks" not in calls.read_text()

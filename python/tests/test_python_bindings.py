"""joulepipe's Python package against its own C++ library and CLI: profiles,
planning (bit for bit the CLI's files), simulation, errors with their field,
Ctrl-C, measurement windows, the agent's clocks and the coordinated plan.

Tests that touch NVML run a child process whose LD_LIBRARY_PATH points at
the simulated library (NVML is loaded once per process); the others import
the build tree's package here (conftest.py). Every child has a timeout.
"""

import csv
import json
import pathlib
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from build_paths import CLI, LIB, REPO, package_built, python_env

if not package_built():
    pytest.skip("joulepipe._core not built (pip install pybind11; cmake --build build)",
                allow_module_level=True)

import joulepipe as jp  # noqa: E402

A40 = REPO / "data" / "profiles" / "gpt3-175b+a40_bf16.csv"
P_BLOCK = 70.38


def run_cli(*args, timeout=120):
    proc = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def run_child(tmp_path, body, config=None, timeout=120):
    """Runs `body` in a fresh Python that imports the build tree's joulepipe
    (and, with `config`, loads the simulated NVML library it configures);
    returns the value the body passes to out(...)."""
    env = python_env(None)
    if config is not None:
        cfg = tmp_path / "sim-nvml.json"
        cfg.write_text(json.dumps(config))
        env = python_env(cfg)
    script = "import json\ndef out(v):\n    print('RESULT ' + json.dumps(v), flush=True)\n"
    proc = subprocess.run([sys.executable, "-c", script + textwrap.dedent(body)], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(l[7:]) for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert len(results) == 1, proc.stdout + proc.stderr
    return results[0]


# ---- the package ---------------------------------------------------------------------


def test_version_is_the_clis():
    assert jp.__version__ == run_cli("--version").stdout.strip()


def test_sim_nvml_library_dir_is_the_packaged_library():
    packaged = os.path.join(jp.sim_nvml_library_dir(), "libnvidia-ml.so.1")
    with open(packaged, "rb") as a, open(LIB, "rb") as b:
        assert a.read() == b.read()


# ---- profiles --------------------------------------------------------------------------


def test_profile_round_trip_and_metadata(tmp_path):
    p = jp.read_profile(A40)
    assert p.stages == 8
    assert p.metadata.source == ""  # a Perseus CSV carries no metadata
    points = p.points(0, jp.Kind.FORWARD)
    assert points[0][0] > points[-1][0]  # highest clock first
    p.metadata.gpu = "NVIDIA A40"
    p.metadata.p_block_w = P_BLOCK
    p.metadata.source = "imported"
    out = tmp_path / "p.csv"
    p.write(out)
    again = jp.Profile.read(out)
    assert again.to_csv() == p.to_csv() == out.read_text()
    assert (again.metadata.gpu, again.metadata.p_block_w, again.metadata.source) == (
        "NVIDIA A40", P_BLOCK, "imported")
    # Nothing of the user's is replaced without being asked.
    with pytest.raises(FileExistsError, match="overwrite=True"):
        p.write(out)
    p.metadata.gpu = "changed"
    p.write(out, overwrite=True)
    assert jp.read_profile(out).metadata.gpu == "changed"


def test_simulated_profile_is_the_clis(tmp_path):
    out = tmp_path / "cli.csv"
    run_cli("profile", "--simulate", "--model", "gpt3-xl", "--gpu", "a100-pcie", "--tp", 1,
            "--pp", 4, "--out", out)
    py = jp.simulate_profile("gpt3-xl", "a100-pcie", tp=1, pp=4)
    assert py.metadata.source == "simulated"
    assert py.metadata.gpu and py.metadata.p_block_w > 0

    def without_date(text):
        return [l for l in text.splitlines() if not l.startswith("# date:")]

    assert without_date(py.to_csv()) == without_date(out.read_text())
    # A Hugging Face model in fp32, as Perseus's Merak runs (bench_fidelity).
    hf = tmp_path / "hf.csv"
    run_cli("profile", "--simulate", "--model", "bert-huge", "--gpu", "a40", "--tp", 1, "--pp", 8,
            "--microbatch-size", 8, "--framework", "hf-eager", "--precision", "tf32",
            "--recompute", "full", "--out", hf)
    py = jp.simulate_profile("bert-huge-uncased", "a40", tp=1, pp=8, microbatch_size=8,
                             framework="hf-eager", precision="tf32", recompute="full")
    assert "tf32, recompute full, framework hf-eager" in py.metadata.method
    assert without_date(py.to_csv()) == without_date(hf.read_text())
    with pytest.raises(ValueError, match="precision"):
        jp.simulate_profile("gpt3-xl", "a100-pcie", tp=1, pp=4, precision="fp8")
    # Merak's placement: TP pairs across 4-GPU nodes share the node's network.
    placed = tmp_path / "placed.csv"
    run_cli("profile", "--simulate", "--model", "gpt3-6.7b", "--gpu", "a40", "--tp", 2, "--pp", 4,
            "--gpus-per-node", 4, "--rank-order", "pp-first", "--node-network-gbps", 25,
            "--out", placed)
    py = jp.simulate_profile("gpt3-6.7b", "a40", tp=2, pp=4, gpus_per_node=4,
                             rank_order="pp-first", node_network_gbps=25)
    assert without_date(py.to_csv()) == without_date(placed.read_text())
    inside = jp.simulate_profile("gpt3-6.7b", "a40", tp=2, pp=4, gpus_per_node=4)
    assert py.points(0, jp.Kind.FORWARD)[0][1] > 1.2 * inside.points(0, jp.Kind.FORWARD)[0][1]
    with pytest.raises(ValueError, match="node_network_gbps"):
        jp.simulate_profile("gpt3-6.7b", "a40", tp=2, pp=4, gpus_per_node=4,
                            rank_order="pp-first")


def test_memory_estimate_is_the_clis():
    # The CLI's summary line for GPT-3 175B, TP 8 x PP 8 x DP 16, 96 microbatches.
    est = jp.estimate_memory("gpt3-175b", "a100-sxm", tp=8, pp=8, dp=16, microbatches=96)
    assert "estimated" in est["figures"]
    assert est["gpu_gib"] == 80 and est["peak_stage"] == 0
    first = est["stages"][0]
    assert round(est["peak_gib"], 1) == 27.3 and first["in_flight"] == 8
    assert round(first["model_state_gib"], 1) == 17.7
    assert math.isclose(first["total_gib"], first["model_state_gib"] + first["activation_gib"])
    assert math.isclose(est["headroom_gib"], 80 - est["peak_gib"])
    # GPipe keeps every microbatch; without the distributed optimizer the
    # state is 18 bytes per parameter.
    gpipe = jp.estimate_memory("gpt3-175b", "a100-sxm", tp=8, pp=8, dp=16, microbatches=96,
                               schedule="gpipe")
    assert math.isclose(gpipe["stages"][0]["activation_gib"], 12 * first["activation_gib"],
                        rel_tol=0.01)
    plain = jp.estimate_memory("gpt3-175b", "a100-sxm", tp=8, pp=8, dp=16,
                               distributed_optimizer=False)
    assert math.isclose(plain["stages"][3]["model_state_gib"] / est["stages"][3]["model_state_gib"],
                        18 / 6.75)
    too_big = jp.estimate_memory("gpt3-175b", "a100-sxm", tp=8, pp=1)
    assert too_big["headroom_gib"] < 0
    with pytest.raises(ValueError, match="schedule"):
        jp.estimate_memory("gpt3-175b", "a100-sxm", tp=8, pp=8, schedule="zb-v")


def test_tune_is_the_clis(tmp_path):
    # GPT-3 XL on 16 A100-SXM, today TP 2 x PP 4 x DP 2: the same answer as
    # `joulepipe tune --json`, and a chosen plan of the chosen configuration.
    args = dict(gpus=16, tp=2, pp=4, global_batch=32, max_microbatch_size=2, max_chunks=3,
                grid_points=20)
    seen = []
    r = jp.tune("gpt3-1.3b", "a100-sxm", progress=lambda phase, f: seen.append(phase), **args)
    cli = subprocess.run(
        [CLI, "tune", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "16", "--tp", "2",
         "--pp", "4", "--global-batch", "32", "--max-microbatch-size", "2", "--max-chunks", "3",
         "--grid-points", "20", "--json"],
        capture_output=True, text=True, timeout=300, check=True)
    j = json.loads(cli.stdout)
    assert r["saving_pct"] == pytest.approx(j["saving_pct"], rel=1e-12)
    assert r["chosen"]["text"].startswith(f"TP {j['chosen']['tp']} x PP {j['chosen']['pp']}")
    assert r["saving_pct"]["total"] >= r["saving_pct"]["clocks"] > 0
    plan = r["chosen"]["plan"]
    assert plan.stages == r["chosen"]["pp"]
    assert plan.microbatches == r["chosen"]["microbatches"]
    assert len(r["envelope"]) == j["envelope_points"]
    assert any(c["status"] == "dominated" for c in r["candidates"])
    assert seen and seen[0].startswith("tuning TP 2 x PP 4 x DP 2")
    with pytest.raises(ValueError, match="keep"):
        jp.tune("gpt3-1.3b", "a100-sxm", gpus=16, tp=2, pp=4, keep="cp")


# ---- planning --------------------------------------------------------------------------


def test_wait_load_says_it_needs_a_cuda_gpu():
    """python -m joulepipe.wait_load (calibrate-wait's load) on a machine
    without CUDA: exit 2 naming why, at once."""
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-m", "joulepipe.wait_load", "--device", "0"],
                          env=python_env(None), capture_output=True, text=True, timeout=120)
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the load would spin until stopped")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs a CUDA GPU" in proc.stderr


def test_plan_pipeline_with_a_wait_model_is_the_clis(tmp_path):
    """wait_model= re-prices the frontier as `plan --wait-model`: the same
    chosen point, lowered waits and energy as summary.json."""
    wait = tmp_path / "wait.json"
    wait.write_text(json.dumps({"version": 1, "kind": "wait_model", "switch_latency_s": 0.005,
                                "points": [{"frequency": 1740, "blocked_w": 80},
                                           {"frequency": 600, "blocked_w": 60}]}))
    flat = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK)
    p = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, wait_model=wait)
    assert flat.wait_model.startswith("uncalibrated") and flat.lowered_waits == 0
    assert flat.energy_with_lowered_waits_j == flat.energy_j
    assert p.wait_model.startswith("calibrated (") and p.lowered_waits > 0
    assert p.energy_with_lowered_waits_j < p.energy_j
    lowered = [e for s in range(8) for e in p.stage_plan(s) if len(e) == 6]
    heads = [p.head_wait(s) for s in range(8)]
    # Every stage but the first waits for the fill: lowered from the step's beginning.
    assert heads[0] is None and all(h[0] == 600 and h[1] > 0 for h in heads[1:]), heads
    assert len(lowered) + 7 == p.lowered_waits and all(e[4] == 600 for e in lowered)
    run_cli("plan", "--profile", A40, "--schedule", "1f1b", "--stages", 8, "--microbatches", 24,
            "--p-block", P_BLOCK, "--wait-model", wait, "--max-plans", 3, "--out", tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    chosen = summary["chosen"]
    assert chosen["lowered_waits"] == p.lowered_waits
    assert chosen["energy_with_lowered_waits_j"] == pytest.approx(p.energy_with_lowered_waits_j,
                                                                  rel=1e-12)
    assert chosen["time_s"] == pytest.approx(p.time_s, rel=1e-12)


def test_plan_power_limits_is_the_clis(tmp_path):
    out = tmp_path / "limits"
    run_cli("plan", "--profile", A40, "--schedule", "1f1b", "--stages", 8, "--microbatches", 12,
            "--p-block", P_BLOCK, "--slowdown", 0.05, "--lever", "power-limit", "--out", out)
    r = jp.plan_power_limits(A40, stages=8, microbatches=12, p_block_w=P_BLOCK, slowdown=0.05)
    assert r["plan"].to_json() == (out / "chosen.json").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert r["saving"] * 100 == pytest.approx(summary["chosen"]["saving_pct"], rel=1e-12)
    assert r["power_limits_w"] == r["plan"].power_limits_w and len(r["power_limits_w"]) == 8
    assert r["time_s"] <= r["deadline_s"] and r["saving"] > 0
    assert len(r["frontier"]) == summary["frontier_points"]
    least = jp.plan_power_limits(A40, stages=8, microbatches=12, p_block_w=P_BLOCK,
                                 least_energy=True)
    assert least["energy_j"] <= r["energy_j"]
    floor = jp.plan_power_limits(A40, stages=8, microbatches=12, p_block_w=P_BLOCK,
                                 slowdown=0.05, min_power_limit_w=5000)
    assert floor["saving"] == 0 and floor["power_limits_w"] == [0.0] * 8
    with pytest.raises(ValueError, match="one goal"):
        jp.plan_power_limits(A40, stages=8, microbatches=12, slowdown=0.1, least_energy=True)


def test_plan_power_limits_takes_the_catalogues_range_as_the_cli(tmp_path):
    # A profile that names its GPU: its power limit range is the catalogue's
    # (the A40's, 100..300 W) unless the keywords say otherwise, as in the CLI.
    named = tmp_path / "a40.csv"
    named.write_text("# gpu: NVIDIA A40\n" + pathlib.Path(A40).read_text())
    out = tmp_path / "limits"
    run_cli("plan", "--profile", named, "--schedule", "1f1b", "--stages", 8, "--microbatches", 12,
            "--p-block", P_BLOCK, "--slowdown", 0.05, "--lever", "power-limit", "--out", out)
    summary = json.loads((out / "summary.json").read_text())
    r = jp.plan_power_limits(str(named), stages=8, microbatches=12, p_block_w=P_BLOCK,
                             slowdown=0.05)
    assert r["power_limit_range_w"] == (summary["inputs"]["min_power_limit_w"],
                                        summary["inputs"]["max_power_limit_w"])
    assert r["power_limit_range_w"][0] > 0 and "catalogue" in r["power_limit_range_from"]
    assert r["plan"].to_json() == (out / "chosen.json").read_text()
    given = jp.plan_power_limits(str(named), stages=8, microbatches=12, p_block_w=P_BLOCK,
                                 slowdown=0.05, max_power_limit_w=250)
    assert given["power_limit_range_w"][1] == 250
    assert given["power_limit_range_from"].startswith("min_power_limit_w/max_power_limit_w over")
    with pytest.raises(ValueError, match="min_power_limit_w .* is above max_power_limit_w"):
        jp.plan_power_limits(str(named), stages=8, microbatches=12, p_block_w=P_BLOCK,
                             min_power_limit_w=280, max_power_limit_w=250)


def test_plan_is_bit_for_bit_the_clis(tmp_path):
    out = tmp_path / "plan"
    run_cli("plan", "--profile", A40, "--schedule", "1f1b", "--stages", 8, "--microbatches", 24, "--p-block", P_BLOCK,
            "--max-plans", 0, "--out", out)
    plan = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK)
    assert plan.to_json() == (out / "chosen.json").read_text()
    with open(out / "frontier.csv") as f:
        rows = list(csv.DictReader(f))
    frontier = plan.frontier.tolist()
    assert len(rows) == len(frontier) == len(plan.frontier)
    # The CLI writes round-trip decimals: the same doubles, bit for bit.
    assert [(float(r["time_s"]), float(r["energy_j"])) for r in rows] == frontier
    assert plan.point_json(plan.chosen_index) == plan.to_json()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chosen"]["energy_j"] == plan.energy_j
    assert summary["bound_at_baseline"]["energy_j"] == plan.bound_energy_j
    assert plan.p_block_w == P_BLOCK and plan.p_block_source == "request"
    assert 0 < plan.saving < 0.5
    # One clock per instruction of each stage, in execution order.
    stage0 = plan.stage_plan(0)
    assert len(stage0) == 2 * 24
    assert stage0[0][0] == jp.Kind.FORWARD and all(mhz > 0 for *_, mhz in stage0)


def test_operating_points_are_the_clis(tmp_path):
    """Each goal chooses the same point as `joulepipe plan` with its flag."""
    cases = [({"least_energy": True}, ["--least-energy"]),
             ({"least_energy": True, "host_power_w": 150.0}, ["--least-energy", "--host-power", 150]),
             ({"slowdown": 0.05}, ["--max-slowdown", 1.05]),
             ({"power_budget_w": 1500.0}, ["--power-budget", 1500])]
    for i, (kwargs, flags) in enumerate(cases):
        out = tmp_path / f"plan{i}"
        run_cli("plan", "--profile", A40, "--schedule", "1f1b", "--stages", 8, "--microbatches", 24,
                "--p-block", P_BLOCK, "--out", out, *flags)
        plan = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, **kwargs)
        summary = json.loads((out / "summary.json").read_text())
        assert plan.to_json() == (out / "chosen.json").read_text(), kwargs
        assert plan.energy_scope == summary["chosen"]["energy_scope"]
        assert plan.counted_energy_j == summary["chosen"]["counted_energy_j"]
    node = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, least_energy=True,
                            host_power_w=150.0)
    assert node.goal == "least-energy"
    assert node.energy_scope == "GPU + host energy (host 150 W per GPU)"
    assert math.isclose(node.counted_energy_j, node.energy_j + 150.0 * 8 * node.time_s)
    with pytest.raises(ValueError, match="choose one goal"):
        jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, least_energy=True,
                         slowdown=0.05)
    with pytest.raises(ValueError, match="the least any plan uses is"):
        jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, energy_budget_j=1.0)


def test_frontier_is_a_numpy_view_without_copies():
    np = pytest.importorskip("numpy")
    plan = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK)
    a = np.asarray(plan.frontier)
    assert a.shape == (len(plan.frontier), 2) and a.dtype == np.float64
    assert not a.flags.writeable and not a.flags.owndata
    assert a[plan.chosen_index].tolist() == [plan.time_s, plan.energy_j]
    assert np.all(np.diff(a[:, 0]) > 0)
    frontier = plan.frontier
    del plan  # the view keeps its plan alive
    assert np.asarray(frontier)[0, 0] == a[0, 0]


def test_evaluate_replays_the_chosen_plan():
    plan = jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK)
    e = jp.evaluate_plan(A40, plan.to_json(), p_block_w=P_BLOCK)
    assert e["stages"] == 8 and e["microbatches"] == 24
    assert math.isclose(e["time_s"], plan.time_s, rel_tol=1e-9)
    assert math.isclose(e["energy_j"], plan.energy_j, rel_tol=1e-9)
    assert e["predicted_energy_j"] == plan.energy_j


def test_simulate_a_job_with_a_straggler():
    r = jp.simulate(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, pipelines=4,
                    iterations=4, straggler_pipeline=1, straggler_slowdown=1.2)
    assert r["gpus"] == 32 and r["has_straggler"]
    assert r["joulepipe"]["energy_j"] < r["baseline"]["energy_j"]
    assert r["saving_pct"] > 0
    cli = json.loads(run_cli("simulate", "--profile", A40, "--p-block", P_BLOCK, "--stages", 8,
                             "--microbatches", 24, "--pipelines", 4, "--iterations", 4,
                             "--straggler-pipeline", 1, "--straggler-slowdown", 1.2,
                             "--json").stdout)
    assert cli["saving_pct"] == pytest.approx(r["saving_pct"], rel=1e-12)


def test_simulate_with_a_wait_model_is_the_clis(tmp_path):
    wait = tmp_path / "wait.json"
    wait.write_text(json.dumps({"version": 1, "kind": "wait_model", "switch_latency_s": 0.005,
                                "points": [{"frequency": 1740, "blocked_w": 80},
                                           {"frequency": 600, "blocked_w": 60}]}))
    args = dict(stages=8, microbatches=24, p_block_w=P_BLOCK, pipelines=4, iterations=2,
                straggler_pipeline=1, straggler_slowdown=1.2)
    flat = jp.simulate(A40, **args)
    r = jp.simulate(A40, wait_model=wait, **args)
    assert r["wait_model"].startswith("calibrated (") and flat["wait_model"].startswith("uncal")
    assert r["joulepipe"]["lowered_wait_s"] > 0 and flat["joulepipe"]["lowered_wait_s"] == 0
    assert r["joulepipe"]["energy_j"] < flat["joulepipe"]["energy_j"]
    assert r["baseline"]["energy_j"] == flat["baseline"]["energy_j"]
    cli = json.loads(run_cli("simulate", "--profile", A40, "--p-block", P_BLOCK, "--stages", 8,
                             "--microbatches", 24, "--pipelines", 4, "--iterations", 2,
                             "--straggler-pipeline", 1, "--straggler-slowdown", 1.2,
                             "--wait-model", wait, "--json").stdout)
    assert cli["saving_pct"] == pytest.approx(r["saving_pct"], rel=1e-12)


# ---- errors ----------------------------------------------------------------------------


def test_errors_are_python_exceptions_with_the_field(tmp_path):
    with pytest.raises(jp.InputError) as e:
        jp.plan_pipeline(A40, stages=0, microbatches=24, p_block_w=P_BLOCK)
    assert isinstance(e.value, ValueError)
    assert e.value.field == "Spec::stages"
    with pytest.raises(jp.InputError) as e:
        jp.plan_pipeline(A40, stages=8, microbatches=24, schedule="zigzag")
    assert e.value.field == "Spec::kind" and "gpipe, 1f1b, interleaved" in str(e.value)
    with pytest.raises(jp.InputError) as e:  # a Perseus CSV has no P_block
        jp.plan_pipeline(A40, stages=8, microbatches=24)
    assert e.value.field == "PlanRequest::p_block_w"
    with pytest.raises(FileNotFoundError) as e:
        jp.read_profile(tmp_path / "missing.csv")
    assert e.value.filename == str(tmp_path / "missing.csv")
    with pytest.raises(FileNotFoundError):
        jp.plan_pipeline(tmp_path / "missing.csv", stages=8, microbatches=24)
    with pytest.raises(jp.InputError) as e:
        jp.plan_pipeline(42, stages=8, microbatches=24)
    assert e.value.field == "profile"
    bad = tmp_path / "bad.csv"
    bad.write_text("stage,instruction,frequency,time,energy\n0,forward,1410,-1,5\n")
    with pytest.raises(jp.InputError, match=r"bad.csv line 2"):
        jp.read_profile(bad)
    with pytest.raises(jp.InputError) as e:
        jp.simulate_profile("gpt3-xl", "a100-pcie", tp=3, pp=4)
    assert e.value.field == "Parallelism::tp"
    with pytest.raises(jp.InputError) as e:
        jp.simulate_profile("no-such-model", "a100-pcie", tp=1, pp=1)
    assert "gpt3-1.3b" in str(e.value)  # names the known models
    # No C++ type name reaches the user.
    assert "std::" not in str(e.value) and "joulepipe::" not in str(e.value)


def test_ctrl_c_cancels_a_long_plan(tmp_path):
    """SIGINT during a 30-second plan: KeyboardInterrupt within a second,
    the progress callback ran on the caller's thread, and the interpreter
    carries on (the planner's thread is gone)."""
    script = textwrap.dedent(f"""
        import signal, sys, threading, time, joulepipe as jp
        # A job started in the background by a non-interactive shell inherits
        # SIGINT ignored, and Python then installs no KeyboardInterrupt
        # handler; a user at a terminal has it, so the test sets it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        events = []
        def progress(phase, fraction):
            events.append((phase, fraction, threading.current_thread() is threading.main_thread()))
            if len(events) == 1:
                print("STARTED", flush=True)
        try:
            jp.plan_pipeline({str(A40)!r}, stages=8, microbatches=256, p_block_w={P_BLOCK},
                             resolution_s=3e-4, progress=progress)
            print("FINISHED", flush=True)
        except KeyboardInterrupt:
            print("INTERRUPTED", time.monotonic(), len(events),
                  all(main for _, _, main in events), threading.active_count(), flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=python_env(None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "STARTED"
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    line = out.strip().splitlines()[-1].split()
    assert line[0] == "INTERRUPTED", out + err
    assert float(line[1]) - sent < 1.0  # stopped within a second
    assert int(line[2]) >= 1 and line[3] == "True"
    assert int(line[4]) == 1  # only the main thread is left
    assert proc.returncode == 0


def test_a_progress_callback_that_raises_stops_the_plan():
    calls = []

    def progress(phase, fraction):
        calls.append(phase)
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        jp.plan_pipeline(A40, stages=8, microbatches=24, p_block_w=P_BLOCK, progress=progress)
    assert calls == ["relaxation"]


# ---- measurement and the agent (simulated NVML) ------------------------------------------

SIM_LOAD = {"gpu": "a100-sxm4-80gb", "count": 2, "power_reading": "instant",
            "energy_update_period_ms": 100,
            "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0,
                      "compute_fraction": 0.8}]}


def test_measurement_window_matches_the_energy_counter(tmp_path):
    r = run_child(tmp_path, """
        import time, joulepipe as jp, pynvml as n
        m = jp.Monitor(gpus=[0])
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        power_w = n.nvmlDeviceGetPowerUsage(h) / 1000
        m.begin("window")
        time.sleep(1.0)
        w = m.end("window")
        logger = jp.StepLogger(m, tokens_per_step=1000)
        logger.begin_step(); time.sleep(0.3); rec = logger.end_step()
        out({"power_w": power_w, "energy": w.gpu_energy_j, "duration": w.duration_s,
             "sources": w.gpu_sources, "approx": w.approximate, "rec": rec,
             "summary": logger.summary()})
    """, config=SIM_LOAD)
    # Constant power under the load: energy = P x duration within one 100 ms
    # counter update at each end.
    assert r["energy"] == pytest.approx(r["power_w"] * r["duration"], abs=2 * 0.1 * r["power_w"])
    assert r["sources"] == ["counter"] and r["approx"] is False
    assert r["rec"]["tokens"] == 1000 and r["rec"]["tokens_per_s"] > 0
    assert r["rec"]["avg_power_w"] == pytest.approx(r["power_w"], rel=0.7)
    assert r["summary"]["steps"] == 1


def test_agent_applies_the_planned_clocks(tmp_path):
    log = tmp_path / "calls.jsonl"
    config = dict(SIM_LOAD, permissions={"clocks": True}, call_log=str(log))
    r = run_child(tmp_path, """
        import time, joulepipe as jp
        gpu = jp.gpus()[0]
        F, B = jp.Kind.FORWARD, jp.Kind.BACKWARD
        plan = [(F, 0, 0, 1200), (F, 1, 0, 1005), (B, 0, 0, 1410), (B, 1, 0, 900)]
        agent = jp.Agent(nvml_index=gpu["nvml_index"], control="nvml")
        agent.set_plan(plan)
        for step in range(2):
            agent.on_step_begin()
            for kind, mb, chunk, _ in plan:
                agent.on_instruction_begin(kind, mb, chunk)
                time.sleep(0.02)
                agent.on_instruction_end(kind, mb, chunk)
            agent.on_step_end()
        agent.wait_idle(5)
        mode = agent.mode
        agent.close()
        out({"mode": mode, "stats": agent.stats(), "fallback": agent.fallback_reason,
             "log": agent.take_log()})
    """, config=config)
    assert r["fallback"] is None, r
    assert r["mode"] == "execute"
    calls = [json.loads(l) for l in log.read_text().splitlines()]
    locked = [c["args"]["max_mhz"] for c in calls if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    # Every instruction's clock in execution order, both steps (the agent
    # skips a clock that is already set).
    assert locked == [1200, 1005, 1410, 900] * 2
    assert calls[-1]["function"] == "nvmlDeviceResetGpuLockedClocks"  # close restores
    assert r["stats"]["applied"] == 8


def test_agent_lowers_the_waits_a_wait_model_plan_names(tmp_path):
    """plan --wait-model -> Plan.read -> stage_plan carries the wait clocks
    (6-tuples) -> the agent locks them at the instructions' ends; the last
    stage's fill (Plan.head_wait) is lowered at the step's beginning."""
    wait = tmp_path / "wait.json"
    wait.write_text(json.dumps({"version": 1, "kind": "wait_model", "switch_latency_s": 0.005,
                                "points": [{"frequency": 1410, "blocked_w": 95},
                                           {"frequency": 510, "blocked_w": 70}]}))
    a100 = REPO / "data" / "profiles" / "gpt3-175b+a100_sxm_bf16.csv"
    run_cli("plan", "--profile", str(a100), "--schedule", "1f1b", "--stages", "8",
            "--microbatches", "12", "--p-block", "83.64", "--max-plans", "3",
            "--wait-model", str(wait), "--out", str(tmp_path / "plans"))
    log = tmp_path / "calls.jsonl"
    config = dict(SIM_LOAD, permissions={"clocks": True}, call_log=str(log))
    r = run_child(tmp_path, f"""
        import joulepipe as jp
        whole = jp.Plan.read({str(tmp_path / "plans")!r})
        plan = whole.stage_plan(7)
        head = whole.head_wait(7)
        lowered = [p for p in plan if len(p) == 6]
        agent = jp.Agent(nvml_index=jp.gpus()[0]["nvml_index"], control="nvml")
        agent.set_plan(plan, head_wait=head)
        agent.on_step_begin()
        agent.wait_idle(5)
        for p in plan:
            agent.on_instruction_begin(*p[:3])
            agent.wait_idle(5)
            agent.on_instruction_end(*p[:3])
            agent.wait_idle(5)
        agent.on_step_end()
        agent.close()
        out({{"lowered": [list(p[3:]) for p in lowered], "n": len(plan), "stats": agent.stats(),
              "fallback": agent.fallback_reason, "head": head, "head0": whole.head_wait(0)}})
    """, config=config)
    assert r["fallback"] is None, r
    assert r["lowered"], "the last stage waits between its backwards"
    assert all(w == 510 and restore > 0 for _, w, restore in r["lowered"]), r["lowered"]
    # The last stage waits for 7 forwards before its first: lowered from the step's beginning.
    assert r["head0"] is None, r
    assert r["head"][0] == 510 and r["head"][1] > 0, r
    assert r["stats"]["lowered_waits"] == len(r["lowered"]) + 1
    calls = [json.loads(l) for l in log.read_text().splitlines()]
    locked = [c["args"]["max_mhz"] for c in calls if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    assert locked[0] == 510, locked  # the head wait, before the first forward's clock
    assert locked.count(510) >= 2


def test_knob_profile_plan_carries_knobs_to_the_agent(tmp_path):
    """A profile with a knob column -> plan -> Plan.read -> stage_plan 7-tuples
    -> agent.planned_knobs names each running instruction's setting."""
    rows = ["stage,instruction,frequency,time,energy,knob.overlap"]
    for stage in range(2):
        scale = 1 + 0.5 * stage  # stage 1 is the slow one
        for kind, t in (("forward", 0.010), ("backward", 0.020)):
            for mhz, slower, cheaper in ((1410, 1.0, 1.0), (1005, 1.3, 0.8)):
                time, energy = t * scale * slower, 3 * t * scale * cheaper
                rows.append(f"{stage},{kind},{mhz},{time!r},{energy!r},1")
                # overlap=2 is faster and cheaper on the slow stage only
                if stage == 1:
                    rows.append(f"{stage},{kind},{mhz},{0.8 * time!r},{0.9 * energy!r},2")
    profile = tmp_path / "knobs.csv"
    profile.write_text("\n".join(rows) + "\n")
    run_cli("plan", "--profile", str(profile), "--schedule", "1f1b", "--stages", "2",
            "--microbatches", "4", "--p-block", "60", "--max-plans", "3",
            "--out", str(tmp_path / "plans"))
    config = dict(SIM_LOAD, permissions={"clocks": True})
    r = run_child(tmp_path, f"""
        import joulepipe as jp
        plan = jp.Plan.read({str(tmp_path / "plans")!r}).stage_plan(1)
        agent = jp.Agent(nvml_index=jp.gpus()[0]["nvml_index"], control="nvml")
        agent.set_plan(plan)
        seen = []
        agent.on_step_begin()
        for p in plan:
            agent.on_instruction_begin(*p[:3])
            seen.append(agent.planned_knobs)
            agent.on_instruction_end(*p[:3])
        agent.on_step_end()
        agent.wait_idle(5)
        out({{"plan": [list(p[3:]) for p in plan], "seen": seen,
              "fallback": agent.fallback_reason}})
        agent.close()
    """, config=config)
    assert r["fallback"] is None, r
    assert all(len(p) == 4 for p in r["plan"]), r["plan"]  # every row of stage 1 has knobs
    assert r["seen"] == [p[3] for p in r["plan"]]
    assert "overlap=2" in r["seen"], r["seen"]


def test_agent_without_clock_permission_falls_back_and_training_goes_on(tmp_path):
    r = run_child(tmp_path, """
        import joulepipe as jp
        agent = jp.Agent(nvml_index=jp.gpus()[0]["nvml_index"], control="nvml")
        agent.set_plan([(jp.Kind.FORWARD, 0, 0, 1200)])
        agent.on_step_begin()
        agent.on_instruction_begin(jp.Kind.FORWARD, 0, 0)
        agent.wait_idle(5)  # the lock is tried (else the step end's default overtakes it)
        agent.on_instruction_end(jp.Kind.FORWARD, 0, 0)
        agent.on_step_end()
        agent.wait_idle(5)
        out({"mode": agent.mode, "fallback": agent.fallback_reason})
        agent.close()
    """, config=SIM_LOAD)
    assert r["mode"] in ("off", "fallback")  # never "execute": no clock is ever set
    assert r["fallback"] and "permission" in r["fallback"].lower(), r


def test_a_power_limit_follows_the_one_rule_of_every_reader(tmp_path):
    """Issue 57, 3: 0 (the default limit) or 1..5000 W, as a plan file and
    the CLI's flags read it (model::IsPowerLimitW); 0.5 W passed here."""
    r = run_child(tmp_path, """
        import joulepipe as jp
        agent = jp.Agent(nvml_index=jp.gpus()[0]["nvml_index"], control="nvml")
        said = []
        for watts in (0.5, 5001.0, float("nan"), -1.0):
            try:
                agent.set_plan([(jp.Kind.FORWARD, 0, 0, 1200)], power_limit_w=watts)
                said.append("accepted")
            except ValueError as error:
                said.append(str(error))
        out(said)
        agent.close()
    """, config=SIM_LOAD)
    assert r == ["power_limit_w must be 0 (the default limit) or 1..5000 W"] * 4, r


def test_no_nvml_is_a_gpu_error_with_the_fix(tmp_path):
    r = run_child(tmp_path, """
        import joulepipe as jp
        try:
            jp.gpus()
            out(None)
        except jp.GpuError as e:
            out([type(e).__name__, isinstance(e, RuntimeError), str(e)])
    """, config={"init_error": "driver_not_loaded"})
    assert r[0] == "GpuError" and r[1] is True
    assert "JOULEPIPE_NVML_LIBRARY" in r[2] or "driver" in r[2].lower()


def test_coordinated_plan_with_no_coordinator_keeps_default_clocks(tmp_path):
    """One object drives the agent: its hooks alone run the loop; an
    unreachable coordinator costs a bounded start and one log line."""
    log = tmp_path / "calls.jsonl"
    config = dict(SIM_LOAD, permissions={"clocks": True}, call_log=str(log))
    r = run_child(tmp_path, """
        import time, joulepipe as jp
        agent = jp.Agent(nvml_index=jp.gpus()[0]["nvml_index"], control="nvml")
        c = jp.CoordinatedPlan(agent, "http://127.0.0.1:9", "job", 0, start_wait_s=0,
                               start_timeout_s=1)
        began = time.monotonic()
        started = c.start()
        took = time.monotonic() - began
        for i in range(3):
            c.on_step_begin()
            c.on_instruction_begin(jp.Kind.FORWARD, 0, 0)
            c.on_instruction_end(jp.Kind.FORWARD, 0, 0)
            c.on_step_end()
        stats = c.stats()
        lines = c.take_log()
        agent_stats = agent.stats()
        agent.close()  # closes the coordinated plan first
        out({"started": started, "took": took, "stats": stats, "log": lines,
             "agent": agent_stats, "mode": agent.mode})
    """, config=config)
    assert r["started"] is False and r["took"] < 5
    assert r["stats"]["running_version"] == 0 and r["mode"] == "off"
    assert r["stats"]["reports_queued"] == 3, r["stats"]  # the three iterations
    assert any("unreachable" in l or "default clocks" in l for l in r["log"]), r["log"]
    assert not log.exists() or "SetGpuLockedClocks" not in log.read_text()


def test_measure_command_is_the_clis_supervisor(tmp_path):
    """joulepipe.measure_command runs a command in one window as `joulepipe
    measure` does: its exit code kept, a SIGTERM to this process forwarded to
    the command (which dies of it: 143), a command that cannot run named."""
    r = run_child(tmp_path, """
        import os
        import joulepipe as jp
        done = jp.measure_command(["sh", "-c", "sleep 0.2; exit 4"])
        # From another process: a thread of this one started before the call
        # would not have the signal blocked (docs/python.md says so).
        import subprocess
        subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -TERM {os.getpid()}"])
        killed = jp.measure_command(["sleep", "10"])
        missing = jp.measure_command(["/no/such/joulepipe-command"])
        out({"exit": done["exit_code"], "duration": done["measurement"].duration_s,
             "energy": done["measurement"].gpu_energy_j,
             "killed": killed["exit_code"], "note": killed["exit_note"],
             "killed_s": killed["measurement"].duration_s,
             "missing": [missing["started"], missing["exit_code"], missing["not_run"]]})
    """, config=SIM_LOAD)
    assert r["exit"] == 4 and 0.19 <= r["duration"] < 3 and r["energy"] > 0, r
    assert r["killed"] == 128 + signal.SIGTERM and r["note"] == "killed by SIGTERM", r
    assert r["killed_s"] < 5, r
    assert r["missing"][0] is False and r["missing"][1] == 127, r
    assert "cannot run /no/such/joulepipe-command" in r["missing"][2], r


def test_join_power_traces_is_power_join_as_a_call(tmp_path):
    """jp.join_power_traces: two ranks' traces, rank 1's clock 2.3 s ahead,
    aligned on their step ends into the job's power with its grid figures."""
    for rank in (0, 1):
        t0 = 1.8e9 + 2.3 * rank
        samples = [[t0 + i * 0.01, 400 if (i % 100) < 80 else 100] for i in range(300)]
        ends = [[k, t0 + k + 1.0] for k in range(3)]
        (tmp_path / f"p{rank}.json").write_text(json.dumps(
            {"version": 1, "kind": "power_trace", "rank": rank, "gpu": "G", "interval_s": 0.01,
             "samples": samples, "step_ends": ends}))
    j = jp.join_power_traces([tmp_path / "p1.json", tmp_path / "p0.json"])
    assert j["ranks"] == [1, 0] and j["common_steps"] == [3, 3]
    assert j["offset_s"][1] == pytest.approx(-2.3, abs=1e-6)  # rank 0's clock, from rank 1's
    assert j["grid"]["peak_w"] == 800 and j["grid"]["trough_w"] == 200
    assert all(abs(t - a - b) < 1e-9 for t, a, b in zip(j["total_w"], *j["rank_w"]))
    unaligned = jp.join_power_traces([tmp_path / "p0.json", tmp_path / "p1.json"],
                                     align_on_steps=False)
    assert unaligned["grid"]["trough_w"] == 500
    with pytest.raises(jp.InputError, match="kind must be"):
        (tmp_path / "x.json").write_text('{"version": 1, "kind": "plan"}')
        jp.join_power_traces([tmp_path / "x.json"])

"""Megatron-LM's own pretrain_gpt.py under joulepipe's launcher, as its users
run it, on a CPU: every mode, a batch-size rampup, a resume, and TensorBoard
beside Megatron's own --log-energy.

Opt-in: $JOULEPIPE_MEGATRON_LM names a Megatron-LM checkout at tag
core_v0.16.1 (the megatron-core wheel has no megatron.training); skipped
otherwise. CUDA is mapped to the CPU by megatron_lm_cpu/ (tests only), and
the simulated NVML library stands in for two A100s.

    git clone --branch core_v0.16.1 https://github.com/NVIDIA/Megatron-LM
    JOULEPIPE_MEGATRON_LM=$PWD/Megatron-LM python -m pytest python/tests/test_megatron_lm_pretrain_gpt.py
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build_paths import CLI, python_env

CHECKOUT = os.environ.get("JOULEPIPE_MEGATRON_LM")
pytestmark = pytest.mark.skipif(
    not CHECKOUT or not (Path(CHECKOUT) / "pretrain_gpt.py").is_file(),
    reason="set JOULEPIPE_MEGATRON_LM to a Megatron-LM checkout at core_v0.16.1 "
           "to run its pretrain_gpt.py")
pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")
pytest.importorskip("tensorboard", reason="Megatron-LM's --tensorboard-dir needs tensorboard")
pytest.importorskip("pynvml", reason="Megatron-LM's --log-energy needs nvidia-ml-py")

RUNNER = Path(__file__).parent / "megatron_lm_cpu" / "run_pretrain.py"
SIM = {"gpu": "a100-sxm4-80gb", "count": 2, "power_reading": "instant",
       "energy_update_period_ms": 100, "permissions": {"clocks": True},
       "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 1.0, "compute_fraction": 0.8}]}

# A GPT of 2 (1F1B) or 4 (interleaved, 2 chunks per stage) layers, PP = 2,
# 4 microbatches of 2 sequences of 32 tokens, mock data, 6 iterations, an
# evaluation every 3. The fusions are CUDA kernels: off. Megatron's gradient
# clipping asserts CUDA tensors: off.
MEGATRON = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
            "--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 "
            "--lr 1e-3 --mock-data --tokenizer-type NullTokenizer --vocab-size 128 "
            "--distributed-backend gloo --no-gradient-accumulation-fusion "
            "--transformer-impl local --use-cpu-initialization --no-persist-layer-norm "
            "--no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion "
            "--no-rope-fusion --clip-grad 0 --log-interval 1 --eval-interval 3 --eval-iters 1 "
            "--pipeline-model-parallel-size 2").split()
LAYOUTS = {"1f1b": [],
           "interleaved": ["--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "1"]}
TOKENS = 8 * 32  # global batch x sequence


def pretrain(run_dir, joulepipe, *megatron, iterations=6, layout="1f1b", timeout=420):
    """Runs pretrain_gpt.py on 2 ranks from `run_dir` (its own simulated
    GPUs' call log and TensorBoard folder); returns stdout + stderr."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / "sim-nvml.json"
    config.write_text(json.dumps(dict(SIM, call_log=str(run_dir / "calls.jsonl"))))
    env = python_env(config)
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    runner = shutil.which("torchrun")
    cmd = ([runner] if runner else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--standalone", "--nproc-per-node", "2", str(RUNNER), *map(str, joulepipe), "--",
        str(Path(CHECKOUT) / "pretrain_gpt.py"), *MEGATRON, *LAYOUTS[layout],
        "--tensorboard-dir", str(run_dir / "tb"), *map(str, megatron)]
    if not any(str(a) in ("--train-samples", "--train-iters") for a in megatron):
        cmd += ["--train-iters", str(iterations)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=run_dir)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def losses(run_dir):
    """Megatron's own losses, exactly: the training 'lm loss' and the
    validation losses its TensorBoard writer got (float32), by step."""
    scalars = tensorboard(run_dir)
    return {tag: scalars[tag] for tag in ("lm loss", "lm loss validation")}


def tensorboard(run_dir):
    """{tag: [(step, value), ...]} over the run folder's event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found = {}
    for events in sorted((run_dir / "tb").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return found


def lines(out, rank):
    return [l for l in out.splitlines() if l.startswith("joulepipe: iteration ")
            and f"| rank {rank} |" in l]


def locked(run_dir, device):
    calls = [json.loads(l) for l in (run_dir / "calls.jsonl").read_text().splitlines()]
    mine = [c for c in calls if c["device"] == device]
    return ([c["args"]["max_mhz"] for c in mine if c["function"] == "nvmlDeviceSetGpuLockedClocks"],
            mine[-1]["function"])


def plan(tmp_path, layout):
    profile = tmp_path / "p2.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", "2", "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    out = tmp_path / f"plan-{layout}"
    cmd = [str(CLI), "plan", "--profile", str(profile), "--stages", "2", "--microbatches", "4",
           "--out", str(out)]
    cmd += ["--schedule", "interleaved", "--chunks", "2"] if layout == "interleaved" else [
        "--schedule", "1f1b"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out, json.loads((out / "chosen.json").read_text())


@pytest.mark.parametrize("layout", ["1f1b", "interleaved"])
def test_measure_and_optimize_keep_megatrons_losses(tmp_path, layout):
    """off, measure and optimize with a plan: Megatron's losses bit for bit
    the same; a line per iteration and rank with Megatron's numbers; the
    planned clocks on each rank's own GPU, given back at the end."""
    plan_dir, chosen = plan(tmp_path, layout)
    pretrain(tmp_path / "off", ["--joulepipe", "off"], layout=layout)
    measured = pretrain(tmp_path / "measure", ["--joulepipe", "measure"], layout=layout)
    optimized = pretrain(tmp_path / "optimize", ["--joulepipe", "optimize", "--joulepipe-plan",
                                                 plan_dir], layout=layout)
    baseline = losses(tmp_path / "off")
    assert len(baseline["lm loss"]) == 6 and len(baseline["lm loss validation"]) == 4
    assert losses(tmp_path / "measure") == baseline
    assert losses(tmp_path / "optimize") == baseline

    for rank in (0, 1):
        got = lines(measured, rank)
        assert [int(l.split()[2]) for l in got] == [1, 2, 3, 4, 5, 6], measured[-3000:]
        assert all("J/iter/GPU" in l and "tokens/s" in l for l in got)
    assert not (tmp_path / "measure" / "calls.jsonl").exists()  # measure sets no clock
    # Megatron's evaluations, apart from the iterations: every 3, then its
    # final one on the validation and test sets.
    evaluations = [l.split(" | ")[0] for l in measured.splitlines()
                   if l.startswith("joulepipe: evaluation ") and "| rank 0 |" in l]
    assert evaluations == ["joulepipe: evaluation after iteration 3"] + [
        "joulepipe: evaluation after iteration 6"] * 3, measured[-3000:]

    assert optimized.count("applied to stage") == 2, optimized[-3000:]
    assert "default clocks, measured" not in optimized
    for device in (0, 1):  # rank r runs on GPU r (Megatron's set_device(local rank))
        clocks, last = locked(tmp_path / "optimize", device)
        planned = {i["frequency"] for i in chosen["stages"][device]}
        assert clocks and set(clocks) <= planned, (device, clocks)
        assert last == "nvmlDeviceResetGpuLockedClocks"


def test_profile_then_plan_in_the_job(tmp_path):
    """profile writes the merged profile; optimize with neither a plan nor a
    coordinator profiles in situ, plans on rank 0 and applies it per rank."""
    profiled = tmp_path / "profile"
    out = pretrain(profiled, ["--joulepipe", "profile", "--joulepipe-profile-out",
                              profiled / "measured.csv", "--joulepipe-profile-stride-mhz", "90"],
                   iterations=24)
    rows = [l.split(",") for l in (profiled / "measured.csv").read_text().splitlines()
            if l and l[0].isdigit()]
    assert {(r[0], r[1]) for r in rows} == {(s, k) for s in "01" for k in ("forward", "backward")}
    assert "# source: measured" in (profiled / "measured.csv").read_text()
    assert "predicted saving" in out, out[-3000:]
    for device in (0, 1):
        assert locked(profiled, device)[1] == "nvmlDeviceResetGpuLockedClocks"

    embedded = tmp_path / "embedded"
    out = pretrain(embedded, ["--joulepipe", "optimize", "--joulepipe-profile-stride-mhz", "90"],
                   iterations=30)
    assert "planning 1f1b, 2 stages x 4 microbatches" in out, out[-3000:]
    for rank in (0, 1):
        assert f"joulepipe [rank {rank}]: plan v1 applied to stage {rank}" in out, out[-3000:]
        assert "plan v1" in lines(out, rank)[-1]
    for device in (0, 1):
        assert locked(embedded, device)[1] == "nvmlDeviceResetGpuLockedClocks"


def test_batch_size_rampup(tmp_path):
    """--rampup-batch-size 4 4 8: two iterations of 4 sequences (2
    microbatches), then 8 (4): the plan for the final shape applies from
    iteration 3, and tokens/s counts each iteration's own batch."""
    plan_dir, _ = plan(tmp_path, "1f1b")
    run = tmp_path / "rampup"
    out = pretrain(run, ["--joulepipe", "optimize", "--joulepipe-plan", plan_dir,
                         "--joulepipe-log", run / "log-{rank}.jsonl"],
                   "--rampup-batch-size", "4", "4", "8", "--train-samples", "56")
    for rank in (0, 1):
        rows = [json.loads(l) for l in (run / f"log-{rank}.jsonl").read_text().splitlines()]
        rows = [r for r in rows if r.get("kind", "iteration") == "iteration"]
        assert [r["iteration"] for r in rows] == list(range(1, 9))
        assert [round(r["tokens_per_s"] * r["time_s"]) for r in rows] == [128] * 2 + [256] * 6
        assert [r["plan_version"] for r in rows] == [0, 0] + [1] * 6
        assert all(r["clocks_applied"] > 0 for r in rows[2:])
    assert out.count("back to 4 microbatches") == 2, out[-3000:]


def test_resume_counts_on_and_appends(tmp_path):
    """A run saves at iteration 3; resumed with --load, joulepipe counts 4,
    5, 6 as Megatron does, appends to the same log, and its TensorBoard steps
    are Megatron's; the resumed losses are those of the same resume without
    joulepipe."""
    run = tmp_path / "run"
    log = ["--joulepipe", "measure", "--joulepipe-log", run / "log-{rank}.jsonl"]
    ckpt = ["--save-interval", "3", "--ckpt-format", "torch"]
    first = pretrain(run, log, "--save", run / "ckpt", *ckpt)
    saves = [l.split(" | ")[0] for l in first.splitlines()
             if l.startswith("joulepipe: checkpoint ") and "| rank 1 |" in l]
    assert saves == ["joulepipe: checkpoint after iteration 3",
                     "joulepipe: checkpoint after iteration 6"], first[-3000:]
    shutil.rmtree(run / "ckpt" / "iter_0000006")
    (run / "ckpt" / "latest_checkpointed_iteration.txt").write_text("3")
    shutil.copytree(run / "ckpt", tmp_path / "ckpt-off")
    shutil.rmtree(run / "tb")
    out = pretrain(run, log, "--save", run / "ckpt", "--load", run / "ckpt", *ckpt)
    pretrain(tmp_path / "off", ["--joulepipe", "off"], "--save", tmp_path / "ckpt-off",
             "--load", tmp_path / "ckpt-off", *ckpt)
    assert [int(l.split()[2]) for l in lines(out, 0)] == [4, 5, 6], out[-3000:]
    resumed = losses(run)
    assert [step for step, _ in resumed["lm loss"]] == [4, 5, 6]
    assert resumed == losses(tmp_path / "off")
    for rank in (0, 1):
        rows = [json.loads(l) for l in (run / f"log-{rank}.jsonl").read_text().splitlines()]
        assert [r["iteration"] for r in rows if r.get("kind", "iteration") == "iteration"] == [
            1, 2, 3, 4, 5, 6, 4, 5, 6]
    steps = {step for step, _ in tensorboard(run)["joulepipe/energy-per-gpu-j"]}
    assert steps == {4, 5, 6}


def test_tensorboard_beside_megatrons_log_energy(tmp_path):
    """Megatron's --log-energy writes iter-energy/gpu and power/gpu;
    joulepipe writes only its own tags, at Megatron's steps, into the same
    writer (the last rank's, where Megatron keeps it). --joulepipe-log-rank 1:
    the lines of rank 1 only."""
    run = tmp_path / "tb-run"
    out = pretrain(run, ["--joulepipe", "measure", "--joulepipe-log-rank", "1"], "--log-energy")
    assert len(lines(out, 1)) == 6 and not lines(out, 0), out[-3000:]
    scalars = tensorboard(run)
    for tag in ("iter-energy/gpu", "power/gpu"):  # Megatron's, once per step
        assert [step for step, _ in scalars[tag]] == [1, 2, 3, 4, 5, 6], tag
    for tag in ("joulepipe/energy-per-gpu-j", "joulepipe/power-per-gpu-w",
                "joulepipe/plan-version"):
        assert [step for step, _ in scalars[tag]] == [1, 2, 3, 4, 5, 6], tag
    assert [step for step, _ in scalars["joulepipe/evaluation-energy-per-gpu-j"]] == [3, 6, 6, 6]
    assert not any(re.match(r"joulepipe/", t) and t.endswith("/gpu") for t in scalars)

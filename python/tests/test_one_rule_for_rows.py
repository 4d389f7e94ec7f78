"""One profile, one answer: every front end applies the same rule to a
profile's rows (model::PlannableRows), so `joulepipe plan`, Python's
plan_pipeline and the embedded coordinator (joulepipe._core.CoordJob, what
rank 0 runs) choose the same plan from one measured profile, and `simulate`
and `evaluate` replay it on the same rows: no plan faster than all-max
clocks, and `evaluate` of `plan`'s own chosen.json agrees with it.

The profiles are of the kind that once exhausted `plan`'s memory and got
three different answers from three front ends: measured in a job (2 stages,
4 clocks, millisecond rows), with lower clocks measured faster than the
highest one and one forward slower at two middle clocks than the trend."""

import json
import random
import subprocess

import pytest

from build_paths import CLI, package_built

if not CLI.exists() or not package_built():
    pytest.skip("joulepipe and joulepipe._core not built (cmake --build build)",
                allow_module_level=True)

import joulepipe as jp  # noqa: E402

RESOLUTION_S = 5e-3 / 8  # the coordinator's grid and everyone else's
P_BLOCK = 325.775


def measured_profile(seed):
    rng = random.Random(seed)
    clocks = [1275, 1140, 1005, 870]
    lines = ["# joulepipe profile", "# gpu: NVIDIA A100-SXM4-80GB", f"# p_block_w: {P_BLOCK}",
             "# source: measured", "stage,instruction,frequency,time,energy"]
    for stage in (0, 1):
        for kind, base in (("forward", 1.2e-3), ("backward", 2.2e-3)):
            for mhz in clocks:
                t = base * (0.5 + 0.5 * 1275 / mhz) * rng.uniform(0.75, 1.1)
                if stage == 0 and kind == "forward" and mhz in (1005, 870):
                    t *= rng.uniform(1.2, 1.45)  # slower than the trend
                power = 390 * (mhz / 1275) ** 1.6 * rng.uniform(0.9, 1.1)
                lines.append(f"{stage},{kind},{mhz},{t!r},{t * power!r}")
    return "\n".join(lines) + "\n"


def cli(*args):
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("seed", range(6))
def test_plan_python_and_embedded_agree_and_replays_are_never_faster(tmp_path, seed):
    profile = tmp_path / "p.csv"
    profile.write_text(measured_profile(seed))
    shape = ["--schedule", "1f1b", "--stages", "2", "--microbatches", "4"]

    planned = cli("plan", "--profile", profile, *shape, "--resolution-ms",
                  RESOLUTION_S * 1e3, "--out", tmp_path / "plan")
    assert planned.returncode == 0, planned.stderr
    summary = json.loads((tmp_path / "plan" / "summary.json").read_text())
    chosen = summary["chosen"]
    baseline = summary["baseline"]["time_s"]
    assert chosen["time_s"] >= baseline * (1 - 1e-12)

    python = jp.plan_pipeline(str(profile), stages=2, microbatches=4,
                              resolution_s=RESOLUTION_S)
    assert python.time_s == pytest.approx(chosen["time_s"], rel=1e-12)
    assert python.energy_j == pytest.approx(chosen["energy_j"], rel=1e-12)
    assert python.notes == summary["notes"]

    job = jp.CoordJob("same", 1, 2, 1, "1f1b", 4, 1, P_BLOCK, resolution_s=RESOLUTION_S)
    for rank in (0, 1):
        job.register_rank(rank, 0, rank, 0, [1275, 1140, 1005, 870])
    job.set_profile(profile.read_text())
    assert job.profile_notes() == summary["notes"]
    job.plan()
    embedded = job.plan_for(0)
    assert embedded["predicted_time_s"] == pytest.approx(chosen["time_s"], rel=1e-12)
    assert embedded["predicted_energy_j"] == pytest.approx(chosen["energy_j"], rel=1e-12)

    evaluated = cli("evaluate", "--profile", profile, "--plan", tmp_path / "plan" / "chosen.json",
                    "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    replay = json.loads(evaluated.stdout)
    assert replay["time_s"] == pytest.approx(chosen["time_s"], rel=1e-12)
    assert replay["time_s"] >= baseline * (1 - 1e-12)

    simulated = cli("simulate", "--profile", profile, *shape, "--pipelines", "1",
                    "--resolution-ms", RESOLUTION_S * 1e3, "--json")
    assert simulated.returncode == 0, simulated.stderr
    sim = json.loads(simulated.stdout)
    assert sim["notes"][:len(summary["notes"])] == summary["notes"]
    plans = sim["plans"]
    assert plans["intrinsic"]["time_s"] >= plans["max_clock"]["time_s"] * (1 - 1e-12), plans
    assert plans["intrinsic"]["energy_j"] == pytest.approx(chosen["energy_j"], rel=1e-12)
    assert sim["joulepipe"]["time_s"] >= sim["baseline"]["time_s"] * (1 - 1e-9), sim

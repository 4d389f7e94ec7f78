"""A job plans with a profile measured inside it, where nobody can re-measure
a row: a row the planner's plausibility check would refuse (a noisy sample,
a throttled GPU) is left out of planning and said in words about the job,
and the job runs its plan. Before, the whole plan failed ("planning failed:
the profile of job joulepipe-... line 24: ... re-measure this clock or
delete the row; every rank keeps default clocks"). The rule is one for every
command (model::PlannableRows): `joulepipe plan` leaves the same row out of
the same measured file, and refuses it by line in a file that was not
measured in a job (its user can re-measure it)."""

import subprocess

import pytest

from build_paths import CLI, package_built
from sim_gpu import calls, run_child

if not package_built():
    pytest.skip("joulepipe._core not built (pip install pybind11; cmake --build build)",
                allow_module_level=True)

# Embedded optimize from a given profile: rank 0 plans it in the process
# (one stage has no bubble: a 30 % slowdown makes the plan lower clocks).
CHILD = """
energy = jp.Energy("optimize", microbatches=2, profile=sys.argv[1], max_slowdown=1.3,
                   log=lambda line: print(line, flush=True))
after = 0  # steps run under the plan
for _ in range(40):
    step(energy, 0.002, 0.003)
    after += bool(energy._session._plans.version)
    if after == 3:
        print("RUNNING", energy._session._plans.version,
              energy._session._agent.stats()["applied"], flush=True)
        break
energy.close()
"""


def test_a_noisy_row_is_left_out_and_the_job_plans(tmp_path):
    profile = tmp_path / "p.csv"
    subprocess.run([str(CLI), "profile", "--simulate", "--model", "gpt3-1.3b", "--gpu",
                    "a100-sxm", "--tp", "1", "--pp", "1", "--out", str(profile)],
                   check=True, capture_output=True, timeout=60)
    lines = profile.read_text().splitlines()
    rows = [i for i, l in enumerate(lines) if l.startswith("0,forward,")]
    noisy = rows[len(rows) // 3]  # a clock in the upper middle, 3x too slow
    cells = lines[noisy].split(",")
    mhz = cells[2]
    cells[3] = repr(float(cells[3]) * 3)
    cells[4] = repr(float(cells[4]) * 3)
    lines[noisy] = ",".join(cells)
    profile.write_text("\n".join(lines) + "\n")
    # Not measured in a job: the planner refuses it by line, as it should (a
    # user can re-measure a file).
    plan_args = [str(CLI), "plan", "--profile", str(profile), "--schedule", "1f1b",
                 "--stages", "1", "--microbatches", "2", "--out", str(tmp_path / "plan")]
    refused = subprocess.run(plan_args, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "re-measure this clock" in refused.stderr, refused.stderr
    # Measured in a job: every command leaves the row out, the same way.
    text = profile.read_text()
    assert "# source: simulated" in text, text[:300]
    profile.write_text(text.replace("# source: simulated", "# source: measured"))
    planned = subprocess.run(plan_args, capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr
    said_by_plan = [l for l in planned.stdout.splitlines() if "left out of the plan" in l]
    assert len(said_by_plan) == 1 and f"at {mhz} MHz" in said_by_plan[0], planned.stdout

    run = run_child(tmp_path, CHILD, profile, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    said = [l for l in out.splitlines() if "left out of the plan" in l]
    assert len(said) == 1, out
    assert f"stage 0 forward at {mhz} MHz was measured at" in said[0], said
    assert "line" not in said[0] and "joulepipe-" not in said[0], said  # no hidden file
    assert "planning failed" not in out, out
    assert any(l.startswith("RUNNING 1") for l in run.stdout.splitlines()), out
    locked = [c["args"]["max_mhz"] for c in calls(tmp_path)
              if c["function"] == "nvmlDeviceSetGpuLockedClocks"]
    assert locked and int(mhz) not in locked, (mhz, locked)

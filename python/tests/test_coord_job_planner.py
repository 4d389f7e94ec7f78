"""CoordJob as rank 0 runs it in embedded mode: planning on a native thread
of its own (start_planning), its outcome in words (take_notes), the plans
handed to the ranks as the wire's JSON (offer), a round of the ranks' times
(report_round), and close() cancelling a solve in progress."""

import json
import time

import pytest

from build_paths import REPO, package_built

if not package_built():
    pytest.skip("joulepipe._core not built (cmake --build build)", allow_module_level=True)

import joulepipe as jp  # noqa: E402

PROFILE = (REPO / "data" / "profiles" / "gpt3-175b+a100_sxm_bf16.csv").read_text()
STAGES, PIPELINES = 8, 2


def job(microbatches, p_block_w=83.64):
    j = jp.CoordJob("embedded", PIPELINES, STAGES, 1, "1f1b", microbatches, 1, p_block_w)
    for p in range(PIPELINES):
        for s in range(STAGES):
            j.register_rank(p * STAGES + s, p, s, 0, [1410, 1005])
    j.set_profile(PROFILE)
    return j


def settled(j, timeout_s=120):
    """Waits for the planner thread's outcome (a plan or a failure)."""
    end = time.monotonic() + timeout_s
    while j.plan_version == 0 and not j.failure:
        assert time.monotonic() < end, "the planner thread never finished"
        time.sleep(0.02)


def test_the_plan_comes_from_the_jobs_own_thread_and_is_offered_as_the_wires_json():
    j = job(16)
    assert j.offer()["plans"] == {}  # nothing before the plan
    assert j.report_round(0, [0.5] * 16, time.time()) == 0  # before the plan: ignored
    j.start_planning()
    with pytest.raises(jp.JobStateError, match="planning was started already"):
        j.start_planning()
    settled(j)
    assert j.plan_version == 1 and not j.failure
    notes = j.take_notes()
    assert len(notes) == 1 and notes[0].startswith("planned in ") and ": initial plan" in notes[0]
    assert j.take_notes() == []  # said once

    offered = j.offer()
    assert sorted(offered["plans"]) == list(range(PIPELINES * STAGES))
    assert offered["baseline_energy_j"] > 0
    for rank, text in offered["plans"].items():
        plan = json.loads(text)  # what a rank's CoordinatedPlan.offer() reads
        mine = j.plan_for(rank)
        assert (plan["rank"], plan["version"], plan["stage"]) == (rank, 1, mine["stage"])
        assert [i["frequency"] for i in plan["instructions"]] == [f for (*_, f) in mine["plan"]]
        assert plan["predicted"]["energy_j"] == pytest.approx(mine["predicted_energy_j"])

    # A round of the ranks' times; a time the policy refuses is dropped, counted.
    assert j.report_round(0, [0.5] * 16, time.time()) == 0
    assert j.report_round(1, [1e9] + [0.5] * 15, time.time()) == 1
    j.close()


def test_a_planning_failure_is_said_once_and_kept():
    j = job(16, p_block_w=None)  # this profile records no P_block
    j.start_planning()
    settled(j)
    assert j.plan_version == 0
    # In the job's words: no C++ token (it named PlanRequest::p_block_w).
    assert "power while blocked (P_block) is not set" in j.failure, j.failure
    assert "::" not in j.failure, j.failure
    notes = j.take_notes()
    assert len(notes) == 1 and notes[0].startswith("planning failed: ")
    assert notes[0].endswith("; every rank keeps default clocks")
    assert "::" not in notes[0], notes[0]


def test_close_cancels_a_solve_in_progress():
    j = job(512)  # seconds to minutes of solving
    j.start_planning()
    j.close()  # cancels and joins (the test's timeout bounds it)
    assert j.plan_version == 0
    assert j.take_notes() == []  # cancelled: nothing to say
    j.close()  # idempotent

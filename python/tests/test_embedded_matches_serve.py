"""Embedded coordination decides exactly as `joulepipe serve`: one recorded
stream of iteration reports (4 pipelines x 8 stages, GPT-3 175B on A100,
pipeline 1 at 1.2x in iterations 3..7) is fed to both the in-process policy
(joulepipe._core.CoordJob, what rank 0 runs in embedded mode) and the
service over HTTP. Every answer (the plan version after each report), every
rank's plan of every version and the switch history must be the same.
"""

import pytest

from build_paths import CLI, REPO, package_built
from coord_server import Server

if not CLI.exists() or not package_built():
    pytest.skip("joulepipe and joulepipe._core not built (cmake --build build)",
                allow_module_level=True)

import joulepipe as jp  # noqa: E402

PROFILE = REPO / "data" / "profiles" / "gpt3-175b+a100_sxm_bf16.csv"
P_BLOCK = 83.64
STAGES, PIPELINES, MICROBATCHES, ITERATIONS = 8, 4, 16, 14
STRAGGLER, SLOWDOWN, FROM, FOR = 1, 1.2, 3, 5
RANKS = [(p * STAGES + s, p, s) for p in range(PIPELINES) for s in range(STAGES)]


def slowdown(pipeline, iteration):
    return SLOWDOWN if pipeline == STRAGGLER and FROM <= iteration < FROM + FOR else 1.0


def comparable(plan):
    """A plan as both sides give it: version, place, clocks, prediction."""
    return (plan["version"], plan["stage"], tuple(plan["clocks"]),
            round(plan["time_s"], 12), round(plan["energy_j"], 9))


def test_the_same_stream_gets_the_same_plans_and_switches(tmp_path):
    server = Server("--db", str(tmp_path / "state.sqlite"))
    try:
        status, body = server.request("POST", "/jobs", {
            "job_id": "same", "pp_degree": STAGES, "dp_degree": PIPELINES, "tp_degree": 1,
            "world_size": STAGES * PIPELINES, "schedule": "1f1b",
            "microbatches": MICROBATCHES, "p_block_w": P_BLOCK})
        assert status == 200, body
        status, body = server.request("PUT", "/jobs/same/profile", PROFILE.read_text(),
                                      content_type="text/csv")
        assert status == 200, body
        job = jp.CoordJob("same", PIPELINES, STAGES, 1, "1f1b", MICROBATCHES, 1, P_BLOCK)
        for rank, p, s in RANKS:
            status, body = server.request("POST", "/jobs/same/ranks", {
                "rank": rank, "dp_rank": p, "pp_rank": s, "tp_rank": 0,
                "available_frequencies": [1410, 1005]})
            assert status == 200, body
            job.register_rank(rank, p, s, 0, [1410, 1005])
        job.set_profile(PROFILE.read_text())
        job.plan()

        def served(after):
            out = {}
            for rank, _, _ in RANKS:
                status, plan = server.request(
                    "GET", f"/jobs/same/plan?rank={rank}&after={after}&wait_s=120", timeout=150)
                assert status == 200, plan
                out[rank] = comparable({
                    "version": plan["version"], "stage": plan["stage"],
                    "clocks": [i["frequency"] for i in plan["instructions"]],
                    "time_s": plan["predicted"]["time_s"],
                    "energy_j": plan["predicted"]["energy_j"]})
            return out

        def embedded():
            out = {}
            for rank, _, _ in RANKS:
                plan = job.plan_for(rank)
                out[rank] = comparable({
                    "version": plan["version"], "stage": plan["stage"],
                    "clocks": [f for (_, _, _, f) in plan["plan"]],
                    "time_s": plan["predicted_time_s"], "energy_j": plan["predicted_energy_j"]})
            return out

        plans = served(0)
        assert plans == embedded()
        times = {rank: plans[rank][3] for rank, _, _ in RANKS}
        version, answers, switched = 1, [], []
        for i in range(ITERATIONS):
            newest = version
            for rank, p, _ in RANKS:
                t = times[rank] * slowdown(p, i)
                status, body = server.request("POST", "/jobs/same/iterations", {
                    "rank": rank, "iteration": i, "time_s": t, "energy_j": None})
                assert status == 200, body
                mine = job.report_iteration(rank, i, t)
                answers.append((i, rank, body["plan_version"], mine))
                assert body["plan_version"] == mine, (i, rank)
                newest = max(newest, mine)
            if newest != version:
                plans = served(version)
                assert plans == embedded(), i
                times = {rank: plans[rank][3] for rank, _, _ in RANKS}
                version = newest
                switched.append(i + 1)
        status, status_body = server.request("GET", "/jobs/same")
        assert status == 200
    finally:
        server.stop()
    # The straggler was seen and recovered from, by both, at the same time.
    assert switched == [FROM + 2, FROM + FOR + 2]
    history = [(h["version"], h["iteration"], h["reason"]) for h in status_body["switches"]]
    assert history == [(s["version"], s["iteration"], s["reason"]) for s in job.switches()]
    assert len(history) == 3 and "straggler" in history[1][2] and "recovered" in history[2][2]

"""The coordination rounds between a job's ranks, on the Link's background
thread (_exchange.Link), so training never waits on another rank.

Each iteration every rank posts its row (protocol/round_row.hpp); a round
gathers every rank's rows, and decides from them alone, which every rank
holds alike, so every rank enters the same collectives in the same round:
when all have shared their profile, rank 0 starts the job's planning (its
embedded CoordJob, or the job at `joulepipe serve`); it reports each
round's pipeline times to the policy, and broadcasts a newer plan version
when it announces one. What a round decides for the training thread comes
back as actions: ("note", line), ("failed", why), ("planning_failed", why),
("plans", offered), ("remote", job_id)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

from joulepipe import _core
from joulepipe._exchange import Link
from joulepipe._options import Options, Topology


class Rounds:
    """One rank's side of the rounds. Everything here but `link` and the
    attributes the training thread sets before the rounds start
    (profile_csv) belongs to the Link's thread."""

    def __init__(self, options: Options, topology: Topology, gpu: Optional[Dict[str, Any]],
                 exchange: Any, shape: Callable[[], Optional[Dict[str, Any]]]) -> None:
        self.options = options
        self.topo = topology
        self._gpu = gpu
        self._shape = shape  # the job's shape (the training thread's set_shape)
        self.link = Link(exchange, self.step)
        self.profile_csv: Optional[str] = None  # optimize with a given profile
        self.plan_started = False     # decided from the rounds' rows
        self._received_version = 0    # the newest version rank 0 announced
        self._told_planning_failed = False
        self._my_info: Any = None
        self._start_failure: Optional[str] = None
        self._remote_job: Optional[str] = None  # rank 0: the job's id at the service
        self.coordinator: Any = None  # rank 0, embedded: the job's CoordJob
        self.refused_reports = 0      # rank 0: round reports the policy refused (dropped)
        self.last_rows: List[Any] = []  # the newest round's RoundRows

    def step(self, row: List[float], info: Any) -> List[Any]:
        """One round: this rank's `row`, and its profile `info` once it shares it."""
        if info is not None:
            self._my_info = info
        rank0 = self.topo.rank == 0
        actions: List[Any] = []
        mine = _core.RoundRow.from_floats(row)
        if rank0 and self.coordinator is not None:
            mine.announced_version = self.coordinator.plan_version
            actions += [("note", line) for line in self.coordinator.take_notes()]
        if rank0 and self._remote_job is not None:
            mine.announced_version = 1  # the job is at the service: every rank joins it
        if rank0 and self._planning_failure() is not None:
            mine.planning_failed = True
        rows = [_core.RoundRow.from_floats(r)
                for r in self.link.exchange.all_gather_rows(mine.to_floats())]
        self.last_rows = rows
        if not self.plan_started:
            if all(r.profile_shared for r in rows):
                self.plan_started = True
                everyone = self.link.exchange.all_gather_object(self._my_info)
                if rank0:
                    self._start_coordinator(everyone)
            return actions
        if rows[0].planning_failed and not self._told_planning_failed:
            self._told_planning_failed = True
            actions.append(("planning_failed", self._planning_failure()))
        if rank0 and self.coordinator is not None:
            self.refused_reports += self.coordinator.report_round(
                rows[0].iteration, [r.pipeline_time_s for r in rows], time.time())
        announced = rows[0].announced_version
        if announced > self._received_version:
            self._received_version = announced
            payload = None
            if rank0 and self._remote_job is not None:
                payload = ("remote", self._remote_job)
            elif rank0 and self.coordinator is not None:
                payload = ("plans", self.coordinator.offer())
            result = self.link.exchange.broadcast_object(payload)
            if result is not None:
                actions.append(tuple(result))
        return actions

    def _start_coordinator(self, everyone: List[Dict[str, Any]]) -> None:
        """Rank 0: the job's profile and its planning."""
        note = self.link.note
        merged = None
        if self.options.profile:
            csv = self.profile_csv
        else:
            merged = _core.merge_reports(
                [_core.ProfileReport.from_dict(e["report"]) for e in everyone if e["report"]])
            csv = merged.to_csv()
            for line in merged.notes:  # requests a throttled GPU did not run
                note(line)
            if self.options.profile_out:
                # model::WriteProfileCsv: atomic, as every profile joulepipe writes.
                _core.Profile.parse(csv, "the merged profile").write(self.options.profile_out,
                                                                     overwrite=True)
                note(f"profile written to {self.options.profile_out}")
        shape = self._shape() or {"schedule": "1f1b", "microbatches": 1, "chunks": 1}
        job_id = self.options.job_id or f"joulepipe-{os.getpid()}-{int(time.time())}"
        p_block_w = None if merged is None else self._unmeasured_p_block(merged)
        if self.options.coordinator:
            self._register_remote(job_id, shape, p_block_w, csv)
            return
        t, chunks = self.topo, shape["chunks"]
        note(f"planning {shape['schedule']}, {t.pp} stages x {shape['microbatches']} microbatches"
             f"{f' x {chunks} chunks' if chunks > 1 else ''}, dp {t.dp}, tp {t.tp} "
             "(embedded, on rank 0)")
        try:
            # The policy, with a planner thread of its own (native: the
            # rounds never wait on the solver): plans, straggler switches.
            job = _core.CoordJob(job_id, t.dp, t.pp, t.tp, shape["schedule"],
                                 shape["microbatches"], chunks, p_block_w,
                                 max_slowdown=self.options.max_slowdown)
            for e in everyone:
                job.register_rank(e["rank"], e["dp_rank"], e["pp_rank"], e["tp_rank"],
                                  e["available_mhz"])
            job.set_profile(csv)
            for line in job.profile_notes():  # rows left out of planning, in words
                note(line)
            job.start_planning()
        except Exception as error:  # a profile for another job, ...
            self._start_failure = f"{type(error).__name__}: {error}"
            note(f"planning failed: {error}; every rank keeps default clocks")
            return
        self.coordinator = job

    def _unmeasured_p_block(self, merged: Any) -> Optional[float]:
        """The library's P_block when the job measured none
        (runtime::UnmeasuredPBlock), said; None otherwise."""
        if self._gpu is None:
            return None
        fallback = _core.unmeasured_p_block(merged, self._gpu["name"])
        if fallback is None:
            return None
        watts, note = fallback
        self.link.note(note)
        return watts

    def _register_remote(self, job_id: str, shape: Dict[str, Any], p_block_w: Optional[float],
                         csv: str) -> None:
        """Rank 0: the job and its profile to `joulepipe serve`, through the
        runtime's client (timeouts, retries). Each rank then registers
        itself and fetches its plans (CoordinatedPlan)."""
        url = self.options.coordinator
        try:
            client = _core.CoordinatorClient(url, self.options.coordinator_token)
            t, slowdown = self.topo, self.options.max_slowdown
            job_id = client.register_job(
                job_id, pp=t.pp, dp=t.dp, tp=t.tp, world_size=t.world_size,
                schedule=shape["schedule"], microbatches=shape["microbatches"],
                chunks=shape["chunks"], slowdown=slowdown - 1.0 if slowdown != 1.0 else None,
                p_block_w=p_block_w, gpu=self._gpu["name"] if self._gpu else None)
            rows = client.upload_profile(job_id, csv)
        except Exception as error:  # unreachable, refused (409: another job of that id), ...
            self._start_failure = f"{type(error).__name__}: {error}"
            self.link.note(f"the coordinator {url} cannot plan this job: {error}; every rank "
                           "keeps default clocks")
            return
        self.link.note(f"job {job_id} registered at {url} with its profile ({rows} rows); "
                       "the service plans it and switches plans on stragglers")
        self._remote_job = job_id

    def _planning_failure(self) -> Optional[str]:
        """Rank 0: why the job cannot be planned (None while fine)."""
        if self._start_failure is not None:
            return self._start_failure
        return (self.coordinator.failure or None) if self.coordinator is not None else None

    def close(self) -> None:
        """After the Link is closed: rank 0's embedded job ends."""
        if self.coordinator is not None:
            self.coordinator.close()

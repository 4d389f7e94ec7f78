"""The coordination policy as rank 0 runs it for the whole job.

``EmbeddedCoordinator`` runs the library's policy (``_core.CoordJob``:
planning, straggler detection, plan switches) inside rank 0's process. The
job needs nothing outside itself. Planning (seconds to minutes on large
pipelines) runs on a background thread with the GIL released, so rank 0
keeps training while it solves; the ranks learn of the plan through the
per-iteration rounds (``_exchange``) and switch at an iteration boundary.

With ``joulepipe serve`` instead (``coordinator=URL``), rank 0 registers the
job and its profile through the runtime's client (``_core.CoordinatorClient``)
and every rank runs a ``_core.CoordinatedPlan`` (the session does both).

The embedded coordinator presents this small interface to the session:
    start(shape, ranks, profile_csv)   once, after profiling
    version        newest plan version ready to hand out (0: none yet)
    offer()        that version's plans for the ranks: {"plans": {rank: the
                   rank's plan as protocol JSON}, "baseline_energy_j": J}
    report(iteration, rows)            the ranks' times of one iteration
    failure        why planning failed (None while fine)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from joulepipe import _core


@dataclass
class JobShape:
    job_id: str
    dp: int
    pp: int
    tp: int
    schedule: str  # "1f1b" | "interleaved"
    microbatches: int
    chunks: int
    p_block_w: Optional[float] = None
    max_slowdown: float = 1.0


@dataclass
class RankInfo:
    rank: int
    dp_rank: int
    pp_rank: int
    tp_rank: int
    available_mhz: List[int]


class EmbeddedCoordinator:
    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._job: Optional[Any] = None
        self._ranks: List[int] = []
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._ready = False
        self.failure: Optional[str] = None
        self.refused_reports = 0  # reports the policy refused (dropped)

    def start(self, shape: JobShape, ranks: List[RankInfo], profile_csv: str) -> None:
        job = _core.CoordJob(shape.job_id, shape.dp, shape.pp, shape.tp, shape.schedule,
                             shape.microbatches, shape.chunks, shape.p_block_w,
                             max_slowdown=shape.max_slowdown)
        for r in ranks:
            job.register_rank(r.rank, r.dp_rank, r.pp_rank, r.tp_rank, r.available_mhz)
        job.set_profile(profile_csv)
        for note in job.profile_notes():  # rows left out of planning, in words
            self._log(note)
        self._job = job
        self._ranks = [r.rank for r in ranks]

        def solve() -> None:
            began = time.monotonic()
            try:
                job.plan()
            except Exception as error:  # InputError, out of memory, ...
                self.failure = str(error)
                self._log(f"planning failed: {error}; every rank keeps default clocks")
                return
            self._log(f"planned in {time.monotonic() - began:.2f} s: {job.plan_for(0)['reason']}")
            with self._lock:
                self._ready = True

        self._thread = threading.Thread(target=solve, name="joulepipe-planner", daemon=True)
        self._thread.start()

    @property
    def version(self) -> int:
        with self._lock:
            return self._job.plan_version if (self._ready and self._job is not None) else 0

    def offer(self) -> Dict[str, Any]:
        """What rank 0 broadcasts: each rank's plan as the wire carries it
        (text that pickles as it is; each rank's CoordinatedPlan reads it)."""
        with self._lock:
            plans = {}
            for rank in self._ranks:
                text = self._job.plan_json_for(rank)
                if text is not None:
                    plans[rank] = text
            return {"plans": plans, "baseline_energy_j": self._job.baseline_energy_j}

    def report(self, iteration: int, rows: List[List[float]]) -> None:
        if self.version == 0:
            return
        now = time.time()
        with self._lock:
            for rank, row in enumerate(rows):
                if row[1] > 0:
                    try:
                        self._job.report_iteration(rank, iteration, row[1], None, now)
                    except _core.InputError:
                        # A report the policy refuses (a time over a day, an
                        # iteration outside the job's window) is dropped, as
                        # the service answers it 400: detection goes on.
                        self.refused_reports += 1

    def switches(self) -> List[Dict[str, Any]]:
        with self._lock:
            return self._job.switches() if self._job is not None else []

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=0.1)  # a solve in progress is abandoned (daemon thread)

"""The coordination policy as rank 0 runs it for the whole job.

``EmbeddedCoordinator`` runs the library's policy (``_core.CoordJob``:
planning, straggler detection, plan switches) inside rank 0's process. The
job needs nothing outside itself. Planning (seconds to minutes on large
pipelines) runs on a background thread with the GIL released, so rank 0
keeps training while it solves; the ranks learn of the plan through the
per-iteration rounds (``_exchange``) and switch at an iteration boundary.

``RemoteCoordinator`` runs the same policy in ``joulepipe serve``: rank 0
registers the job, its ranks and the profile over HTTP and forwards the
iteration reports from a background thread (docs/coordination.md).

Both present the same small interface to the session:
    start(shape, ranks, profile_csv)   once, after profiling
    version        newest plan version ready to hand out (0: none yet)
    plans()        {rank: plan dict} of that version
    report(iteration, rows)            the ranks' times of one iteration
    failure        why planning failed (None while fine)
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
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


def _plan_dict(plan: Dict[str, Any]) -> Dict[str, Any]:
    """A plan that can cross processes (pickle): kinds as strings."""
    out = dict(plan)
    out["plan"] = [(str(k.name).lower() if hasattr(k, "name") else str(k), int(m), int(c), int(f))
                   for (k, m, c, f) in plan["plan"]]
    return out


class EmbeddedCoordinator:
    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._job: Optional[Any] = None
        self._ranks: List[int] = []
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._ready = False
        self.failure: Optional[str] = None

    def start(self, shape: JobShape, ranks: List[RankInfo], profile_csv: str) -> None:
        job = _core.CoordJob(shape.job_id, shape.dp, shape.pp, shape.tp, shape.schedule,
                             shape.microbatches, shape.chunks, shape.p_block_w,
                             max_slowdown=shape.max_slowdown)
        for r in ranks:
            job.register_rank(r.rank, r.dp_rank, r.pp_rank, r.tp_rank, r.available_mhz)
        job.set_profile(profile_csv)
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

    def plans(self) -> Dict[int, Dict[str, Any]]:
        with self._lock:
            out = {}
            for rank in self._ranks:
                plan = self._job.plan_for(rank)
                if plan is not None:
                    out[rank] = _plan_dict(plan)
            return out

    def report(self, iteration: int, rows: List[List[float]]) -> None:
        if self.version == 0:
            return
        now = time.time()
        with self._lock:
            for rank, row in enumerate(rows):
                if row[1] > 0:
                    self._job.report_iteration(rank, iteration, row[1], None, now)

    def switches(self) -> List[Dict[str, Any]]:
        with self._lock:
            return self._job.switches() if self._job is not None else []

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=0.1)  # a solve in progress is abandoned (daemon thread)


class RemoteCoordinator:
    """The policy in `joulepipe serve`, driven by rank 0 over HTTP."""

    def __init__(self, url: str, log: Callable[[str], None], token: Optional[str] = None,
                 timeout_s: float = 10.0) -> None:
        self._url = url.rstrip("/")
        self._log = log
        self._token = token
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._version = 0
        self._plans: Dict[int, Dict[str, Any]] = {}
        self._ranks: List[int] = []
        self._job_id = ""
        self._queue: List[tuple] = []
        self._wake = threading.Condition(self._lock)
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        self._announced = 0
        self._warned = False
        self.failure: Optional[str] = None

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
              timeout: Optional[float] = None) -> Any:
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        request = urllib.request.Request(self._url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self._timeout) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("error", detail)
            except ValueError:
                pass
            raise RuntimeError(f"coordinator {method} {path}: HTTP {error.code}: {detail}") from None
        return json.loads(text) if text else None

    def start(self, shape: JobShape, ranks: List[RankInfo], profile_csv: str) -> None:
        config = {
            "job_id": shape.job_id, "pp_degree": shape.pp, "dp_degree": shape.dp,
            "tp_degree": shape.tp, "schedule": shape.schedule,
            "microbatches": shape.microbatches,
        }
        if shape.schedule == "interleaved":
            config["chunks"] = shape.chunks
        if shape.p_block_w is not None:
            config["p_block_w"] = shape.p_block_w
        if shape.max_slowdown != 1.0:
            config["slowdown"] = shape.max_slowdown - 1.0
        self._job_id = urllib.parse.quote(shape.job_id, safe="")
        self._ranks = [r.rank for r in ranks]
        self._call("POST", "/jobs", config)
        for r in ranks:
            self._call("POST", f"/jobs/{self._job_id}/ranks",
                       {"rank": r.rank, "dp_rank": r.dp_rank, "pp_rank": r.pp_rank,
                        "tp_rank": r.tp_rank, "available_frequencies": r.available_mhz})
        self._call("PUT", f"/jobs/{self._job_id}/profile", profile_csv, content_type="text/csv")
        self._thread = threading.Thread(target=self._loop, name="joulepipe-coordinator",
                                        daemon=True)
        self._thread.start()
        with self._lock:
            self._announced = 1
            self._wake.notify()

    def _fetch(self, version: int) -> None:
        plans = {}
        for rank in self._ranks:
            got = self._call("GET", f"/jobs/{self._job_id}/plan?rank={rank}&after={version - 1}"
                                    f"&wait_s=60", timeout=90)
            if got is None:  # 204: not planned yet; asked again on the next wake
                return
            predicted = got.get("predicted", {})
            plans[rank] = {"version": got["version"], "reason": got.get("reason", ""),
                           "predicted_time_s": predicted.get("time_s", 0.0),
                           "predicted_energy_j": predicted.get("energy_j", 0.0),
                           "stage": got.get("stage", 0),
                           "plan": [(i["instruction"], i["microbatch"], i.get("chunk", 0),
                                     i["frequency"]) for i in got["instructions"]]}
        newest = min(p["version"] for p in plans.values())
        with self._lock:
            self._plans = plans
            self._version = newest

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._stop and not self._queue and self._announced <= self._version:
                    self._wake.wait(timeout=1.0)
                if self._stop:
                    return
                batch, self._queue = self._queue, []
                wanted = self._announced
            try:
                if wanted > self._version:
                    self._fetch(wanted)
                for iteration, rows in batch:
                    for rank, row in enumerate(rows):
                        if row[1] <= 0:
                            continue
                        answer = self._call("POST", f"/jobs/{self._job_id}/iterations",
                                            {"rank": rank, "iteration": iteration,
                                             "time_s": row[1]})
                        version = int((answer or {}).get("plan_version", 0))
                        with self._lock:
                            self._announced = max(self._announced, version)
                if self._warned:
                    self._log(f"coordinator {self._url} reachable again")
                    self._warned = False
            except Exception as error:  # network trouble never reaches training
                if not self._warned:
                    self._log(f"coordinator {self._url}: {error}; the plan in force stays")
                    self._warned = True
                if self._version == 0 and self.failure is None and "HTTP 409" in str(error):
                    self.failure = str(error)

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def plans(self) -> Dict[int, Dict[str, Any]]:
        with self._lock:
            return dict(self._plans)

    def report(self, iteration: int, rows: List[List[float]]) -> None:
        with self._lock:
            if len(self._queue) < 64:
                self._queue.append((iteration, rows))
                self._wake.notify()

    def switches(self) -> List[Dict[str, Any]]:
        try:
            status = self._call("GET", f"/jobs/{self._job_id}")
            return list(status.get("switches", []))
        except Exception:
            return []

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

"""How the ranks of one job talk to each other for joulepipe: a side process
group of the job's own ``torch.distributed`` (gloo, CPU tensors), used only
by joulepipe's background thread on each rank, never by the training thread
and never inside the training's own collectives.

The traffic is a *round* per training iteration: every rank contributes a
short row of floats (protocol::RoundRow: its iteration, its pipeline time,
whether its profile is given, the plan version it runs, the iterations its
sweep still needs; rank 0 adds the newest plan version and whether planning
failed) and receives everyone's. Every rank sees the same
rows in the same round, so every rank takes the same decision in the same
round, and the rare exchanges of objects (the profiles once, the plans at
each plan switch) are entered by all of them together.

``Link`` runs the rounds. With a ``TorchExchange`` it runs them on a
background thread: the training thread only posts its row (a queue put) and
takes what the rounds decided (a queue get without waiting), so it never
waits on the side group. With a ``LocalExchange`` (one process) it runs them
inline; there is nobody to wait for.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from datetime import timedelta
from typing import Any, Callable, Deque, List, Optional, Sequence, Tuple

from joulepipe import _core
from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug

# A round's row: protocol::RoundRow's numbers (protocol/round_row.hpp says
# which slot means what; the session reads them through _core.RoundRow).
ROW_LENGTH = _core.ROUND_ROW_FLOATS


class LocalExchange:
    """One process: every collective is the identity."""

    rank = 0
    world_size = 1
    threaded = False

    def all_gather_rows(self, row: Sequence[float]) -> List[List[float]]:
        return [list(row)]

    def all_gather_object(self, obj: Any) -> List[Any]:
        return [obj]

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def close(self) -> None:
        pass


class TorchExchange:
    """The job's ranks over a gloo side group of torch.distributed. Blocking
    calls, for joulepipe's background thread only; each times out after
    `timeout_s` (a peer gone or stuck), raising.

    Must be created by every rank at the same point (``new_group`` is a
    collective), after ``torch.distributed`` is initialised.
    """

    threaded = True

    def __init__(self, timeout_s: float = 120.0) -> None:
        import torch
        import torch.distributed as dist

        self._torch = torch
        self._dist = dist
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        # gloo works next to any training backend (NCCL included) and keeps
        # joulepipe's traffic off the GPUs and off the training group.
        self._group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
        self._send = torch.zeros(ROW_LENGTH, dtype=torch.float64)
        self._recv = torch.zeros(self.world_size * ROW_LENGTH, dtype=torch.float64)
        # all_gather_single is torch >= 2.13's name for all_gather_into_tensor.
        self._gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def all_gather_rows(self, row: Sequence[float]) -> List[List[float]]:
        for i in range(ROW_LENGTH):
            self._send[i] = float(row[i]) if i < len(row) else 0.0
        self._gather(self._recv, self._send, group=self._group)
        flat = self._recv.tolist()
        return [flat[r * ROW_LENGTH:(r + 1) * ROW_LENGTH] for r in range(self.world_size)]

    def all_gather_object(self, obj: Any) -> List[Any]:
        out: List[Any] = [None] * self.world_size
        self._dist.all_gather_object(out, obj, group=self._group)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        box = [obj if self.rank == 0 else None]
        self._dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]

    def close(self) -> None:
        """Destroys the side group while the interpreter is alive: left to
        the interpreter's teardown, a gloo group whose peers already exited
        can abort the process at exit (SIGABRT, "terminate called without an
        active exception"), after training and its clocks were done."""
        group, self._group = self._group, None
        if group is not None:
            self._dist.destroy_process_group(group)


Action = Tuple[str, Any]


class Link:
    """Runs `step(row, info) -> [actions]` once per posted row, in order: on a
    background thread for a threaded exchange, inline otherwise. The training
    thread calls post() and take() only; neither waits on the network.

    A step that raises (a side-group timeout, a peer gone, a bug) ends the
    rounds on this rank: take() then returns ("failed", why) once, and later
    posts are dropped.
    """

    def __init__(self, exchange: Any, step: Callable[[List[float], Any], List[Action]],
                 name: str = "joulepipe-coordination") -> None:
        self.exchange = exchange
        self._step = step
        self._actions: Deque[Action] = collections.deque()
        self._failed = False
        self._thread: Optional[threading.Thread] = None
        self._inbox: "queue.Queue[Optional[Tuple[List[float], Any]]]" = queue.Queue()
        if getattr(exchange, "threaded", False):
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def post(self, row: List[float], info: Any = None) -> None:
        if self._failed:
            return
        if self._thread is None:
            self._do(row, info)
        else:
            self._inbox.put((row, info))

    def take(self) -> List[Action]:
        out = []
        while True:
            try:
                out.append(self._actions.popleft())
            except IndexError:
                return out

    def note(self, line: str) -> None:
        """A log line for the training thread to say (any thread)."""
        self._actions.append(("note", line))

    @property
    def pending(self) -> int:
        """Rows posted and not yet through their round."""
        return self._inbox.qsize()

    def _do(self, row: List[float], info: Any) -> None:
        try:
            self._actions.extend(self._step(row, info))
        except Exception as error:  # never into training
            self._failed = True
            self._actions.append(("failed", f"{type(error).__name__}: {error}"))

    def _run(self) -> None:
        while True:
            item = self._inbox.get()
            if item is None or self._failed:
                return
            self._do(*item)

    def close(self, timeout_s: float = 30.0) -> None:
        """Lets the posted rounds finish (they need every rank, which all
        close at the same point), at most `timeout_s`; a round still blocked
        then is abandoned (the thread is a daemon)."""
        if self._thread is not None:
            self._inbox.put(None)
            self._thread.join(timeout=timeout_s)
            if self._thread.is_alive():
                return  # a round still uses the exchange: leave it to the process's end
        try:
            self.exchange.close()
        except Exception:
            _logger.debug("close: error ignored", exc_info=True)

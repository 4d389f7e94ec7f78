"""How the ranks of one job talk to each other for joulepipe: a side process
group of the job's own ``torch.distributed`` (gloo, on the CPU), never the
group the training uses.

Two kinds of traffic:

* a *round* per training iteration: every rank contributes a short row of
  floats (its iteration, its pipeline time, whether its profiler is done, the
  plan version it runs; rank 0 adds the newest plan version). The round is an
  asynchronous all-gather started at the end of iteration i and collected at
  the end of iteration i+1, so it never waits on the network inside an
  iteration. Every rank sees the same rows at the same iteration, so every
  rank takes the same decision at the same iteration boundary;
* a rare *exchange of objects* (profiles once, plans at each plan switch):
  a blocking collective that every rank enters at the same iteration boundary
  because they all decided to from the same rows.

``LocalExchange`` is the single-process version (no torch.distributed).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

ROW_LENGTH = 6  # iteration, time_s, profile_done, running_version, announced_version, spare


class LocalExchange:
    """One process: every collective is the identity."""

    rank = 0
    world_size = 1

    def __init__(self) -> None:
        self._pending: Optional[List[List[float]]] = None

    def start_round(self, row: Sequence[float]) -> None:
        self._pending = [list(row)]

    def finish_round(self) -> Optional[List[List[float]]]:
        rows, self._pending = self._pending, None
        return rows

    def all_gather_object(self, obj: Any) -> List[Any]:
        return [obj]

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def close(self) -> None:
        self._pending = None


class TorchExchange:
    """The job's ranks over a gloo side group of torch.distributed.

    Must be created by every rank at the same point (``new_group`` is a
    collective), after ``torch.distributed`` is initialised.
    """

    def __init__(self) -> None:
        import torch
        import torch.distributed as dist

        self._torch = torch
        self._dist = dist
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        # gloo works next to any training backend (NCCL included) and keeps
        # joulepipe's traffic off the GPUs and off the training group.
        self._group = dist.new_group(backend="gloo")
        self._send = torch.zeros(ROW_LENGTH, dtype=torch.float64)
        self._recv = torch.zeros(self.world_size * ROW_LENGTH, dtype=torch.float64)
        self._work = None

    def start_round(self, row: Sequence[float]) -> None:
        if self._work is not None:  # the previous round was never collected
            self._work.wait()
        for i in range(ROW_LENGTH):
            self._send[i] = float(row[i]) if i < len(row) else 0.0
        # all_gather_single is torch >= 2.13's name for all_gather_into_tensor.
        gather = getattr(self._dist, "all_gather_single", None) or \
            self._dist.all_gather_into_tensor
        self._work = gather(self._recv, self._send, group=self._group, async_op=True)

    def finish_round(self) -> Optional[List[List[float]]]:
        if self._work is None:
            return None
        # Every rank started this round one iteration ago, so it is complete
        # (or completes as soon as the slowest rank reaches this boundary,
        # which it must reach anyway for the next gradient sync).
        self._work.wait()
        self._work = None
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
        if self._work is not None:
            try:
                self._work.wait()
            except Exception:  # a peer is gone; nothing to collect
                pass
            self._work = None

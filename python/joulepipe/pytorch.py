"""joulepipe for custom PyTorch training loops.

    import joulepipe.pytorch as jp

    energy = jp.Energy("measure", microbatches=4, tokens_per_iteration=batch * seq)
    with energy:                              # close(): default clocks back
        for step in range(steps):
            with energy.step():
                for mb in range(4):
                    with energy.forward(mb):
                        loss = model(x[mb])
                    with energy.backward(mb):
                        loss.backward()
                energy.pipeline_done()        # optional: before the optimizer step
                optimizer.step()
            print(energy.last)                # the newest finished step's time, energy, ...

Modes:

* ``"measure"``: per step its time, GPU energy, average power, tokens/s and
  J/token, logged through Python's ``logging`` (logger ``"joulepipe"``) and
  kept as :class:`IterationRecord` (``energy.last``, ``energy.records``).
  With a CUDA stream a step is timed where the GPU ran it, and its line
  comes once the device has finished it (usually at the step's end, as the
  loop read its loss). Clocks are never touched.
* ``"profile"``: measure, plus the in-situ profiler for the first steps (a
  sweep of SM clocks); rank 0 writes the merged profile, with its metadata,
  to ``profile_out``.
* ``"optimize"``: every forward/backward runs at its planned clock. The plan
  comes from ``plan=`` (a plan file or a ``joulepipe plan --out`` directory:
  this rank applies its stage's plan from the first step), from
  ``coordinator=`` (a ``joulepipe serve`` URL), or else from the job itself
  (profile, then plan on rank 0).

For a pipeline-parallel loop, say where this rank sits (``pp``, ``pp_rank``,
``dp``, ``dp_rank``, ``tp``, ``tp_rank``), which schedule the loop runs
(``schedule="1f1b"``, ``"gpipe"`` or ``"interleaved"`` with ``chunks``) and
pass ``chunk=`` to forward/backward. Every rank of the job creates its
Energy at the same point (profile and optimize use a side group of
``torch.distributed`` when it is initialised).

Fail-safe: nothing here raises into the training loop once the Energy is
built. A failure (no NVML, no clock permission, a plan that does not fit the
loop) logs one line and the rank runs at default clocks; training goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Callable, Iterator, List, Optional

from joulepipe._exchange import LocalExchange
from joulepipe._options import Options, Topology
from joulepipe._records import IterationRecord
from joulepipe._session import Session

__all__ = ["Energy", "IterationRecord", "logger"]

from joulepipe._log import default_log as _default_log, logger  # noqa: E402


class _Instruction:
    """The context of one forward or backward: begin and end hooks, nothing
    else (a class, not a generator: this is the hot path)."""

    __slots__ = ("_begin", "_end", "_microbatch", "_chunk")

    def __init__(self, begin: Callable[[int, int], None], end: Callable[[int, int], None],
                 microbatch: int, chunk: int) -> None:
        self._begin, self._end, self._microbatch, self._chunk = begin, end, microbatch, chunk

    def __enter__(self) -> None:
        self._begin(self._microbatch, self._chunk)

    def __exit__(self, *exc: Any) -> bool:
        self._end(self._microbatch, self._chunk)
        return False


class Energy:
    """One rank's joulepipe in a custom loop (see the module's docstring)."""

    def __init__(self, mode: str = "measure", *, schedule: str = "1f1b",
                 microbatches: Optional[int] = None, chunks: int = 1, pp: int = 1,
                 pp_rank: int = 0, dp: Optional[int] = None, dp_rank: Optional[int] = None,
                 tp: int = 1, tp_rank: int = 0, log: Optional[Callable[[str], None]] = None,
                 **options: Any) -> None:
        """mode: "measure" | "profile" | "optimize". options: plan (a plan
        file or DIR), coordinator (URL), coordinator_token, max_slowdown,
        control ("auto" | "nvml" | "daemon"), daemon_socket, profile (a CSV to
        plan from), profile_out, profile_stride_mhz, profile_floor,
        tokens_per_iteration, log_path ("{rank}" is replaced; .jsonl or
        .csv), job_id, coordination_timeout_s (each exchange between the
        ranks' joulepipe threads), power_trace (a file per rank, "{rank}"
        replaced: the GPU's power every power_trace_ms, default 10, for
        power_trace_s, default 60, from here on; `joulepipe power --join`
        joins the ranks' into the job's), last_iteration (the last step's
        number, from 0: a grid plan's stop ramp begins that long before it),
        stream (the CUstream the loop launches its kernels on, an int:
        clocks then land when the GPU reaches each instruction; default
        PyTorch's current stream when CUDA is available).
        Bad values raise ValueError here, before training."""
        unknown = sorted(set(options) - set(Options.__dataclass_fields__))
        if unknown:
            raise TypeError(f"Energy() got unknown option(s) {', '.join(unknown)}; known: "
                            f"{', '.join(sorted(Options.__dataclass_fields__))}")
        for name, value in (("pp", pp), ("tp", tp), ("chunks", chunks)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1 (got {value!r})")
        if microbatches is not None and (not isinstance(microbatches, int) or microbatches < 1):
            raise ValueError(f"microbatches must be a whole number >= 1 (got {microbatches!r})")
        if not 0 <= pp_rank < pp:
            raise ValueError(f"pp_rank must be 0..{pp - 1} (got {pp_rank})")
        topology = Topology(local_rank=int(os.environ.get("LOCAL_RANK", "0")))
        exchange: Any = LocalExchange()
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                topology.rank, topology.world_size = dist.get_rank(), dist.get_world_size()
                if topology.world_size > 1 and mode != "measure" and not options.get("plan"):
                    from joulepipe._exchange import TorchExchange

                    exchange = TorchExchange(
                        timeout_s=float(options.get("coordination_timeout_s", 120.0)))
        except ImportError:
            pass
        topology.pp, topology.pp_rank, topology.tp, topology.tp_rank = pp, pp_rank, tp, tp_rank
        topology.dp = dp if dp is not None else max(1, topology.world_size // (pp * tp))
        topology.dp_rank = dp_rank if dp_rank is not None else topology.rank // (pp * tp)
        self._schedule = (schedule, microbatches, chunks)
        self._log = log or _default_log()
        self._session = Session(Options(mode=mode, **options), topology, exchange, self._log)
        self._session.on_record = self._say_record
        self._pipeline_open = False
        self.last: Optional[IterationRecord] = None

    @contextlib.contextmanager
    def step(self, tokens: Optional[float] = None) -> Iterator[None]:
        """One training step (iteration): its forwards, backwards and the
        optimizer step. `tokens`: this step's tokens, for tokens/s and J/token
        (default: the tokens_per_iteration option)."""
        s = self._session
        schedule, microbatches, chunks = self._schedule
        if microbatches is not None:
            s.set_shape(schedule, microbatches, chunks)
        if tokens is not None:
            s.options.tokens_per_iteration = float(tokens)
        s.iteration_begin()
        self._pipeline_open = True
        try:
            yield
        except BaseException as error:
            # Named as what it is, before the step's end finds the plan's
            # instructions missing.
            s.step_raised(error)
            raise
        finally:
            self.pipeline_done()
            # Each finished step's line is said by on_record (a step timed on
            # the device may finish at a later step's end).
            s.iteration_end()

    iteration = step  # the name Megatron's loop uses

    def _say_record(self, record: IterationRecord) -> None:
        self.last = record
        self._log(record.summary())

    def pipeline_done(self) -> None:
        """The step's forwards and backwards are done: call it before the
        gradient all-reduce and optimizer step (the step's end does
        otherwise). The time up to here is the pipeline's time."""
        if self._pipeline_open:
            self._pipeline_open = False
            self._session.pipeline_end()

    def forward(self, microbatch: int, chunk: int = 0) -> "_Instruction":
        """Context around one forward of `microbatch` (model chunk `chunk`)."""
        s = self._session
        return _Instruction(s.forward_begin, s.forward_end, microbatch, chunk)

    def backward(self, microbatch: int, chunk: int = 0) -> "_Instruction":
        """Context around one backward of `microbatch` (model chunk `chunk`)."""
        s = self._session
        return _Instruction(s.backward_begin, s.backward_end, microbatch, chunk)

    @property
    def records(self) -> List[IterationRecord]:
        """Every finished step's record, oldest first."""
        return self._session.records

    @property
    def failure(self) -> Optional[str]:
        """Why this rank runs at default clocks (None while all is well)."""
        return self._session.failure

    def close(self) -> None:
        """Ends an open step, restores default clocks, stops joulepipe's
        threads. Idempotent."""
        self._session.close()

    def __enter__(self) -> "Energy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""An iteration's and a phase's record (what their lines say), and the log
they are written to: the session's iteration log (.csv or .jsonl) and a
TensorBoard-like writer. Writing never raises into training."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug


def tensorboard_scalars(r: "IterationRecord") -> List[Tuple[str, float]]:
    """The scalars an iteration's record writes to a TensorBoard-like writer,
    at the iteration's number as its step."""
    tags = [("joulepipe/energy-per-gpu-j", r.energy_j), ("joulepipe/power-per-gpu-w", r.avg_power_w),
            ("joulepipe/plan-version", r.plan_version)]
    if r.predicted_saving is not None:
        tags.append(("joulepipe/predicted-saving", r.predicted_saving))
    return tags


# How a window's energy was taken (monitor::EnergySourceName), as a line's
# flag says it.
_METHOD_WORDS = {"counter": "counter", "sampling": "sampled", "instant-approx": "one reading"}


def method_of(sources: List[str]) -> str:
    """The flag's word for a window whose GPUs' energy came from `sources`
    (one word per distinct source, in order)."""
    words: List[str] = []
    for s in sources:
        w = _METHOD_WORDS.get(s, s)
        if w not in words:
            words.append(w)
    return "+".join(words)


def window_parts(rank: Optional[int], time_s: float, energy_j: Optional[float],
                  avg_power_w: Optional[float], approximate: bool, unit: str,
                  method: str = "") -> List[str]:
    """A measured window's part of a line: its rank (in a job of more than
    one), time, GPU energy in `unit` flagged with how it was measured
    ("counter", "sampled": power samples taken during it, "one reading")
    and whether it may be off ("approx."), and average power."""
    parts = [] if rank is None else [f"rank {rank}"]
    parts.append(f"{time_s * 1e3:.1f} ms")
    if energy_j is not None:
        flags = [w for w in (method, "approx." if approximate else "") if w]
        flag = f" ({', '.join(flags)})" if flags else ""
        parts.append(f"{energy_j:.3f} {unit}{flag}")
        parts.append(f"{avg_power_w:.1f} W/GPU")
    return parts


@dataclass
class IterationRecord:
    iteration: int
    time_s: float
    pipeline_time_s: float
    energy_j: Optional[float]
    avg_power_w: Optional[float]
    tokens_per_s: Optional[float]
    j_per_token: Optional[float]
    approximate: bool
    plan_version: int
    clocks_applied: int
    predicted_saving: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    rank: Optional[int] = None  # the job's rank, in a job of more than one
    # The job's GPUs j_per_token counts: this GPU's energy times this many
    # (every rank's own estimate of the job's; 1: the job's own figure).
    gpus: int = 1
    # How energy_j was measured: "counter", "sampled" or "one reading"
    # (window_parts); "" without a measurement.
    method: str = ""

    def summary(self) -> str:
        parts = [f"joulepipe: iteration {self.iteration}"] + window_parts(
            self.rank, self.time_s, self.energy_j, self.avg_power_w, self.approximate, "J/iter/GPU",
            self.method)
        if self.tokens_per_s:
            parts.append(f"{self.tokens_per_s:,.0f} tokens/s")
            if self.j_per_token is not None:
                estimate = f" (est.: this GPU x {self.gpus})" if self.gpus > 1 else ""
                parts.append(f"{self.j_per_token * 1e3:.3f} mJ/token{estimate}")
        if self.plan_version:
            saving = (f", predicted saving {self.predicted_saving * 100:.1f} %"
                      if self.predicted_saving is not None else "")
            parts.append(f"plan v{self.plan_version}{saving}, {self.clocks_applied} clock changes")
        return " | ".join(parts)


@dataclass
class PhaseRecord:
    """Work between training iterations, measured apart from them: an
    evaluation or a checkpoint save (at default clocks, as an iteration's
    end left them)."""
    kind: str                         # "evaluation", "checkpoint", or the caller's word
    after_iteration: Optional[int]    # the last training iteration before it; None: none yet
    time_s: float
    energy_j: Optional[float]
    avg_power_w: Optional[float]
    approximate: bool
    rank: Optional[int] = None  # the job's rank, in a job of more than one
    # The job's GPUs j_per_token counts: this GPU's energy times this many
    # (every rank's own estimate of the job's; 1: the job's own figure).
    gpus: int = 1
    method: str = ""  # as IterationRecord.method

    def summary(self) -> str:
        where = (f"after iteration {self.after_iteration}" if self.after_iteration is not None
                 else "before the first iteration")
        parts = [f"joulepipe: {self.kind} {where}"] + window_parts(
            self.rank, self.time_s, self.energy_j, self.avg_power_w, self.approximate, "J/GPU",
            self.method)
        return " | ".join(parts)


class RecordLog:
    """Where records go besides their lines: the iteration log at `path`
    (None: none), JSON lines when it ends in .jsonl, else CSV; and `writer`,
    a TensorBoard-like writer (add_scalar), or None."""

    CSV_HEADER = ("iteration,time_s,pipeline_time_s,energy_j,avg_power_w,tokens_per_s,"
                  "j_per_token,approximate,plan_version,clocks_applied\n")

    def __init__(self, path: Optional[str], writer: Any, note: Callable[[str], None]) -> None:
        self._file: Any = None
        self._jsonl = False
        self._writer = writer
        if path:
            self._open(path, note)

    def _open(self, path: str, note: Callable[[str], None]) -> None:
        """Appends: a resumed run continues its log, never truncates it. A
        CSV gets its header once, and one with other columns is left alone."""
        jsonl = path.endswith(".jsonl")
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            # Private to the user, like every file joulepipe creates
            # (model::kPrivateFileMode); an existing log keeps its mode.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            if not jsonl and os.fstat(fd).st_size > 0:
                first = os.pread(fd, len(self.CSV_HEADER), 0).decode("utf-8", "replace")
                if first != self.CSV_HEADER:
                    os.close(fd)
                    note(f"the iteration log {path} is there with other columns; it is "
                         "left as it is and no log is written: name another file")
                    return
                header = False
            else:
                header = not jsonl
            self._file = os.fdopen(fd, "w", buffering=1)
            self._jsonl = jsonl
        except OSError as error:
            note(f"cannot write the iteration log {path}: {error.strerror}")
            return
        if header:
            self._file.write(self.CSV_HEADER)

    def iteration(self, r: IterationRecord) -> None:
        if self._file is not None:
            try:
                if self._jsonl:
                    self._file.write(json.dumps({"kind": "iteration", **r.__dict__}) + "\n")
                else:
                    def f(v):
                        return "" if v is None else (f"{v:.9g}" if isinstance(v, float) else str(v))
                    self._file.write(",".join(f(v) for v in (
                        r.iteration, r.time_s, r.pipeline_time_s, r.energy_j, r.avg_power_w,
                        r.tokens_per_s, r.j_per_token, int(r.approximate), r.plan_version,
                        r.clocks_applied)) + "\n")
            except Exception:
                _logger.debug("RecordLog.iteration: error ignored", exc_info=True)
        if self._writer is not None and r.energy_j is not None:
            # joulepipe's own tags only: Megatron-LM's --log-energy writes
            # iter-energy/gpu and power/gpu, and two writers of one tag at
            # one step make a curve neither meant.
            try:
                for tag, value in tensorboard_scalars(r):
                    self._writer.add_scalar(tag, value, r.iteration)
            except Exception:
                _logger.debug("RecordLog.iteration: error ignored", exc_info=True)

    def phase(self, r: PhaseRecord) -> None:
        """A phase goes to a .jsonl log (a CSV holds iterations only) and to
        TensorBoard at the step of the iteration before it."""
        if self._file is not None and self._jsonl:
            try:
                self._file.write(json.dumps(r.__dict__) + "\n")
            except Exception:
                _logger.debug("RecordLog.phase: error ignored", exc_info=True)
        if self._writer is not None and r.energy_j is not None and r.after_iteration is not None:
            try:
                self._writer.add_scalar(f"joulepipe/{r.kind}-energy-per-gpu-j", r.energy_j,
                                        r.after_iteration)
                self._writer.add_scalar(f"joulepipe/{r.kind}-time-s", r.time_s, r.after_iteration)
            except Exception:
                _logger.debug("RecordLog.phase: error ignored", exc_info=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

"""A rank's in-situ profile sweep (native _core.InSituProfiler, driven by the
agent's hooks) and what is said about it: its progress while it runs, and,
for a job that ends before it finished, what it would have needed."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

from joulepipe import _core
from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug
from joulepipe._options import Options, Topology


class Sweep:
    """The sweep of this rank's stage over the candidate SM clocks of `gpu`
    (_core.gpus()'s) that the options ask for. `profiling`: the session is
    still in its profile phase (the sweep's numbers mean nothing after it);
    `failed`: the rank gave up its plan."""

    def __init__(self, gpu: Dict[str, Any], options: Options, topology: Topology,
                 note: Callable[[str], None]) -> None:
        self._candidates = _core.candidate_clocks(gpu["supported_sm_mhz"], options.profile_floor,
                                                  options.profile_stride_mhz)
        self.profiler = _core.InSituProfiler(topology.pp_rank, self._candidates, gpu=gpu["name"])
        self.clocks = len(self._candidates)
        self._options = options
        self._topo = topology
        self._note = note

    def say_start(self, control: str) -> None:
        """What the sweep visits and how long it takes (`control`: how the
        clocks are set)."""
        clocks = self._candidates
        least, most = _core.sweep_iterations(clocks)
        self._note(f"profiling stage {self._topo.pp_rank} at {len(clocks)} clocks "
                   f"({clocks[0]}..{clocks[-1]} MHz) through {control}: the sweep takes "
                   f"{least} iterations, up to {most} where noisy clocks are repeated (a "
                   f"larger profile_stride_mhz, --joulepipe-profile-stride-mhz, visits fewer "
                   f"clocks)")
        if (self._options.mode == "profile" and not self._options.profile_out
                and self._topo.rank == 0):
            self._note("profile mode without profile_out: the measured profile is planned and "
                       "its saving logged, but not written; pass profile_out=PATH "
                       "(--joulepipe-profile-out) to keep it")

    @property
    def done(self) -> bool:
        return bool(self.profiler.done)

    def left(self, profiling: bool) -> int:
        """The fewest iterations this rank's sweep still needs (0: none runs)."""
        if not profiling:
            return 0
        try:
            return int(self.profiler.iterations_left)
        except Exception:
            _logger.debug("Sweep.left: error ignored", exc_info=True)
            return 0

    def unfinished(self, profiling: bool, failed: bool) -> Optional[int]:
        """The iterations a sweep still running has seen; None when there is
        none (done, failed, past profiling)."""
        if failed or not profiling:
            return None
        try:
            return None if self.profiler.done else int(self.profiler.iterations)
        except Exception:
            _logger.debug("Sweep.unfinished: error ignored", exc_info=True)
            return None

    def say_progress(self, profiling: bool, failed: bool, every: int) -> None:
        """Every `every` iterations of a sweep, one line per stage (its first
        pipeline's rank): how far it is, so a long sweep is not silence."""
        ran = self.unfinished(profiling, failed)
        if self._topo.dp_rank != 0 or self._topo.tp_rank != 0 or not ran or ran % every:
            return
        self._note(f"profiling stage {self._topo.pp_rank}: {ran} iterations so far; the sweep "
                   f"visits up to {self.clocks} clocks, one per iteration (fewer when lower "
                   f"clocks stop paying, more when a noisy clock is repeated or an implausible "
                   f"one measured again), at least {self.left(profiling)} more")

    def say_unfinished(self, profiling: bool, failed: bool) -> None:
        """A job that ends while its profile sweep still runs gets no profile,
        no plan and no saving: say so, with what it would have needed."""
        ran = self.unfinished(profiling, failed)
        if ran is None:
            return
        partial = self._write_partial()
        kept = (f"; the clocks this rank measured so far are in {partial} (stage "
                f"{self._topo.pp_rank} only, not a profile to plan with)" if partial else "")
        left = self.left(profiling)
        self._note(f"the profile sweep of stage {self._topo.pp_rank} had not finished when the "
                   f"job ended ({ran} iterations ran; it visits {self.clocks} clocks, one per "
                   f"iteration, and repeats noisy ones): no profile was written and nothing was "
                   f"planned; it needed at least {left} more: run at least {ran + left} "
                   f"iterations, more on a noisy machine{kept}")

    def say_job_unfinished(self, rows: List[Any], ran: int, profiling: bool) -> None:
        """Rank 0 writes the job's profile once every rank's sweep is done. A
        job that ends before then gets none: rank 0 says so too (its own
        sweep may have finished), with the most any rank still needed, from
        the newest round's `rows`; `ran`: the iterations the job ran."""
        mine = self.left(profiling)
        # A row is posted at its iteration's pipeline end, before the sweep
        # counted that iteration: one less is left by the job's end.
        left = max([r.sweep_iterations_left - 1 for r in rows] + [mine]) if rows else mine
        unfinished = sorted({i for i, r in enumerate(rows) if r.sweep_iterations_left >= 1})
        if mine > 0 and not any(r != 0 for r in unfinished):
            return  # rank 0's own line (say_unfinished) said it all
        whose = (f"rank{'s' if len(unfinished) > 1 else ''} "
                 f"{', '.join(str(r) for r in unfinished)}" if unfinished else "a rank")
        target = f" to {self._options.profile_out}" if self._options.profile_out else ""
        self._note(f"the job ended before every rank finished its profile sweep ({whose} had "
                   f"not; {ran} iterations ran): no profile was written{target} and nothing was "
                   f"planned; run at least {ran + max(left, 1)} iterations, more on a noisy "
                   f"machine")

    def _write_partial(self) -> Optional[str]:
        """With profile_out, what an unfinished sweep measured, beside it:
        PROFILE.stage<S>.partial.csv (never the profile_out file itself).
        Returns the path written, or None (nothing measured, not asked for,
        not writable)."""
        if not self._options.profile_out:
            return None
        base, ext = os.path.splitext(self._options.profile_out)
        path = f"{base}.stage{self._topo.pp_rank}.partial{ext or '.csv'}"
        try:
            csv = self.profiler.report().to_csv()
            profile = _core.Profile.parse(csv, "the partial profile")
            if profile.stages == 0:
                return None
            profile.write(path, overwrite=True)
        except Exception:
            _logger.debug("Sweep._write_partial: nothing written", exc_info=True)
            return None
        return path

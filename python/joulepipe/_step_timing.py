"""The time and GPU energy of a session's iterations and phases.

With the training's CUDA stream, an iteration's are the device's: CUDA
events at the step's begin and end (runtime/device_meter.hpp, through
_core.StepMeter), with power sampled while the device runs it, so a host
that runs ahead does not cut the window where it was. A step the device
has not finished when the host ends it is finished later (settle), never
by waiting for the GPU. Without a stream, and for phases, the monitor's
windows at the host's points."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from joulepipe import _core
from joulepipe._device import training_stream
from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug
from joulepipe._records import IterationRecord, PhaseRecord, method_of

# How often the GPU's power is sampled for the iteration lines: a step of
# tens of milliseconds gets tens of samples (500 NVML reads a second, off
# the training thread).
STEP_SAMPLING_S = 0.002
# With the training's stream, a step's line is the device's (runtime::
# DeviceMeter: CUDA events at the step's begin and end): its meter's thread
# reads power this often while a step runs on the device, and a step's end
# waits at most STEP_SETTLE_S for it, only once the device is past it.
STEP_METER_POLL_S = 0.001
STEP_SETTLE_S = 0.005
# How long close() lets the device finish the steps still queued.
STEP_DRAIN_S = 10.0

# A window's measurement: GPU energy (None: not measured), whether it may be
# off, and how it was taken (_records.method_of).
Measured = Tuple[Optional[float], bool, str]
# Completes an iteration's record: (record, tokens, time_s, energy, approximate, method).
Finish = Callable[[IterationRecord, float, float, Optional[float], bool, str], IterationRecord]


class StepTiming:
    """The meters of one rank's session on `gpu` (None: time only); `stream`
    is the stream option (_device.training_stream). `finish` completes each
    iteration's record once it is measured, in order; a phase's record is
    end_phase's."""

    def __init__(self, gpu: Optional[Dict[str, Any]], stream: Optional[int], rank: Optional[int],
                 gpus: int, note: Callable[[str], None], finish: Finish) -> None:
        self._gpu = gpu
        self._rank = rank  # the job's rank in a phase's record (None: a job of one)
        self._gpus = gpus  # the job's GPUs
        self._phase_kind: Optional[str] = None  # the open phase's
        self._phase_depth = 0  # begin_phase calls inside the open phase
        self._phase_t0 = 0.0
        self._note = note
        self._finish = finish
        self._said_over_limit = False
        self.monitor: Any = None
        if gpu is not None:
            try:
                self.monitor = self._open_monitor()
            except Exception as error:
                note(f"no GPU energy for this rank ({error}); logging time only")
        # Steps timed on the device: the ones ended on the host and not yet
        # finished there, as (tag, record, tokens).
        self._meter: Any = None
        self._tag = 0
        self._unsettled: List[Tuple[int, IterationRecord, float]] = []
        if gpu is not None and self.monitor is not None:
            stream, _ = training_stream(stream)
            if stream is not None:
                try:
                    self._meter = _core.StepMeter(stream, gpu["nvml_index"],
                                                  poll_period_s=STEP_METER_POLL_S)
                    # The meter samples during steps; the monitor's sampler
                    # would read the same GPU's power besides, 500 times a
                    # second: phases open one of their own (begin_phase).
                    self.monitor = None
                except Exception as error:
                    note(f"iteration lines are timed at the host's points: {error}")

    def _open_monitor(self) -> Any:
        """A monitor of this rank's GPU. A step is often shorter than the
        energy counter's period: its line integrates power samples taken
        during it (monitor.hpp, short_windows_sampled), never one reading
        taken after the step, when default clocks are back."""
        return _core.Monitor(gpus=[self._gpu["index"]], sampling_period_s=STEP_SAMPLING_S,
                             short_windows_sampled=True)

    @property
    def on_device(self) -> bool:
        """Iterations are timed on the device (the training's stream)."""
        return self._meter is not None

    def begin_step(self) -> None:
        if self._meter is not None:
            self._meter.mark(True, self._tag)
        else:
            self._window_begin("joulepipe.iteration")

    def stop_step(self) -> Optional[Measured]:
        """The host ends the step (first thing at its end, so that the
        window holds the step only): the host's measurement, or None when
        the device's comes later (ended_step)."""
        if self._meter is None:
            return self._window_end("joulepipe.iteration")
        self._meter.mark(False, self._tag)
        return None

    def ended_step(self, record: IterationRecord, tokens: float, elapsed: float,
                   measured: Optional[Measured]) -> List[IterationRecord]:
        """The records finished now: the step stop_step ended (`elapsed`
        seconds on the host, `measured` its answer), or, on the device, the
        steps it has run."""
        if measured is not None:
            energy, approximate, method = measured
            return [self._finish(record, tokens, elapsed, energy, approximate, method)]
        self._unsettled.append((self._tag, record, tokens))
        self._tag = (self._tag + 1) & 0xFFFFFFFF
        return self.settle(STEP_SETTLE_S)

    def settle(self, wait_s: float) -> List[IterationRecord]:
        """Finishes the records of the steps the device has run (in order),
        with the device's time and energy; waits up to `wait_s` only when
        the device is already past the newest step's end (never for the
        GPU). A step the meter could not mark keeps its host time and no
        energy."""
        meter = self._meter
        try:
            meter.caught_up(wait_s)
            steps = meter.take()
        except Exception:
            _logger.debug("settle: error ignored", exc_info=True)
            steps = []
        finished = []
        for tag, seconds, joules, counter in steps:
            while self._unsettled and self._unsettled[0][0] != tag:
                _, record, tokens = self._unsettled.pop(0)
                finished.append(self._finish(record, tokens, record.time_s, None, False, ""))
            if not self._unsettled:
                break
            _, record, tokens = self._unsettled.pop(0)
            # Fewer than ten power samples: the energy may be off (as the
            # monitor's sampled windows, monitor.hpp).
            short = not counter and seconds < 10 * STEP_METER_POLL_S
            finished.append(self._finish(record, tokens, seconds, joules, short,
                                         "counter" if counter else "sampled"))
        return finished

    def drain(self) -> None:
        """At close: lets the device finish the steps still queued (at most
        STEP_DRAIN_S), then finishes every record left, host-timed without
        energy where the device did not get there."""
        if self._meter is None:
            return
        deadline = time.monotonic() + STEP_DRAIN_S
        while self._unsettled and time.monotonic() < deadline:
            self.settle(0.0)
            if self._unsettled:
                time.sleep(STEP_METER_POLL_S)
        if self._unsettled:
            self._note(f"{len(self._unsettled)} iteration(s) did not finish on the GPU within "
                       f"{STEP_DRAIN_S:.0f} s of the end: their lines have the host's time "
                       "and no energy")
        while self._unsettled:
            _, record, tokens = self._unsettled.pop(0)
            self._finish(record, tokens, record.time_s, None, False, "")

    @property
    def in_phase(self) -> bool:
        return self._phase_kind is not None

    def begin_phase(self, kind: str) -> None:
        """Work between iterations that is reported apart from them begins
        (an evaluation, a checkpoint save); one begun inside an open phase
        is part of it."""
        if self._phase_kind is not None:
            self._phase_depth += 1
            return
        self._phase_kind = kind
        self._phase_depth = 0
        if self._meter is not None:
            try:  # the phase's own monitor (the meter times the steps)
                self.monitor = self._open_monitor()
            except Exception:
                _logger.debug("begin_phase: error ignored", exc_info=True)
        self._window_begin("joulepipe.phase")
        self._phase_t0 = time.perf_counter()

    def end_phase(self, after_iteration: Optional[int], outer: bool = False
                  ) -> Optional[PhaseRecord]:
        """Ends the phase begin_phase opened (`outer`: with every phase begun
        inside it); its record (None for the end of a nested one, or with
        no phase open). `after_iteration`: the last iteration ended."""
        if self._phase_kind is None:
            return None
        if self._phase_depth > 0 and not outer:
            self._phase_depth -= 1
            return None
        elapsed = time.perf_counter() - self._phase_t0
        energy, approximate, method = self._window_end("joulepipe.phase")
        if self._meter is not None:
            self.monitor = None  # its sampler stops with it
        kind, self._phase_kind = self._phase_kind, None
        return PhaseRecord(
            kind=kind, after_iteration=after_iteration, time_s=elapsed, energy_j=energy,
            avg_power_w=energy / elapsed if energy is not None and elapsed > 0 else None,
            approximate=self.over_limit(energy, elapsed, f"a {kind}") or approximate,
            rank=self._rank, gpus=self._gpus, method=method)

    def over_limit(self, energy: Optional[float], elapsed: float, what: str) -> bool:
        """Whether a window averaged more than the GPU can be set to draw:
        the window's edges, not the GPU (said once)."""
        limit = self._gpu.get("power_limit_w") if self._gpu else None
        if energy is None or not limit or elapsed <= 0 or energy / elapsed <= 1.02 * limit:
            return False
        if not self._said_over_limit:
            self._said_over_limit = True
            self._note(f"{what} averaged {energy / elapsed:.1f} W, above this GPU's "
                       f"power limit ({limit:.0f} W): the energy counter's updates "
                       "fall unevenly in a short window; such values are marked approximate")
        return True

    def _window_begin(self, name: str) -> None:
        """Opens the monitor's window `name` (nothing without a monitor)."""
        if self.monitor is not None:
            try:
                self.monitor.begin(name)
            except Exception:
                _logger.debug("_window_begin: error ignored", exc_info=True)

    def _window_end(self, name: str) -> Measured:
        """The GPU energy of the monitor's window `name`, whether it is
        approximate and how it was measured; (None, False, "") without a
        monitor or on an error."""
        if self.monitor is None:
            return None, False, ""
        try:
            m = self.monitor.end(name)
            return m.gpu_energy_j, m.approximate, method_of(m.gpu_sources)
        except Exception:
            _logger.debug("_window_end: error ignored", exc_info=True)
            return None, False, ""

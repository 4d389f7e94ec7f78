"""One rank's joulepipe during training: the energy of every iteration, and,
when optimising, the in-situ profile, the plan and its clocks.

The integrations (``joulepipe.megatron``, ``joulepipe.pytorch``) call:

    session.iteration_begin()        before the iteration's pipeline work
    session.forward_begin(mb, chunk) / forward_end(mb, chunk)
    session.backward_begin(mb, chunk) / backward_end(mb, chunk)
    session.pipeline_end()           after the last forward/backward
    session.iteration_end()          after the optimizer step (optional: the
                                     next iteration_begin ends it otherwise)
    session.phase_begin(kind) / phase_end()
                                     around work between iterations that is
                                     reported apart (an evaluation, a
                                     checkpoint save)

Modes:
  measure   time, GPU energy, average power, tokens/s and J/token per
            iteration; clocks are never touched.
  profile   measure, plus the in-situ profiler for the first iterations (a
            sweep of SM clocks, docs/profiling.md); then the job is planned
            and the predicted saving logged; clocks go back to default.
  optimize  profile (or a given profile), plan, then every forward/backward
            runs at its planned clock; the plan switches when a straggler
            appears (the coordination policy, docs/coordination.md).

Fail-safe: nothing here raises into training. Any failure (no NVML, the
daemon gone, a schedule that does not match the plan, a planning error)
logs one line and leaves the GPU at its default clocks; measurement goes on
where it can. Hooks are cheap: in execute mode a forward/backward hook is
one call into the native agent (no I/O, no lock; bench/python_hooks.py).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from joulepipe import _core, _guard

from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug

MODES = ("off", "measure", "profile", "optimize")
_FORWARD, _BACKWARD = _core.Kind.FORWARD, _core.Kind.BACKWARD


@dataclass
class Options:
    mode: str = "measure"
    coordinator: Optional[str] = None  # URL of `joulepipe serve`; None: embedded
    coordinator_token: Optional[str] = None
    max_slowdown: float = 1.0          # the plan may be this much slower than all-max clocks
    control: str = "auto"              # "auto" | "nvml" | "daemon"
    daemon_socket: Optional[str] = None
    plan: Optional[str] = None         # a plan file (or `joulepipe plan --out` DIR) to apply
    profile: Optional[str] = None      # a profile CSV to plan from (skips profiling)
    profile_out: Optional[str] = None  # where rank 0 writes the measured profile
    profile_stride_mhz: int = 0        # candidate clocks: every stride (0: every supported)
    profile_floor: float = 0.6         # lowest candidate clock, a fraction of the max
    tokens_per_iteration: float = 0
    log_path: Optional[str] = None     # per-iteration log, "{rank}" replaced; .jsonl or .csv
    job_id: Optional[str] = None
    log_rank: Optional[int] = None     # iteration and phase lines from this rank only; None: all
    coordination_timeout_s: float = 120.0  # each side-group operation between the ranks
    # The GPU's power over time (issue 45): every power_trace_ms for
    # power_trace_s from the session's start, written to power_trace
    # ("{rank}" replaced); `joulepipe power --join` makes the job's of them.
    power_trace: Optional[str] = None
    power_trace_ms: float = 10.0
    power_trace_s: float = 60.0
    # The last training iteration (as iteration_begin numbers them), when
    # known: a grid plan's stop ramp begins that many seconds before it.
    last_iteration: Optional[int] = None
    # The CUDA stream the training launches its kernels on (an int CUstream),
    # so that clocks land where the GPU is: None takes PyTorch's current
    # stream when CUDA is available, else the hooks mark the host's points
    # (said once); 0 is the default stream.
    stream: Optional[int] = None


# The most characters of a profile read from profile= (model::kMaxInputFileBytes).
MAX_PROFILE_CHARS = 256 << 20
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


def power_trace_path(options: "Options", topology: "Topology", rank: Optional[str] = None) -> str:
    """This rank's power trace file: power_trace with "{rank}" replaced, or,
    in a job of more than one rank without it, ".rank<r>" before the
    extension (power.json -> power.rank3.json). `rank` "*" gives the pattern
    of every rank's file."""
    path = options.power_trace or ""
    rank = str(topology.rank) if rank is None else rank
    if "{rank}" in path:
        return path.replace("{rank}", rank)
    if topology.world_size > 1:
        base, ext = os.path.splitext(path)
        return f"{base}.rank{rank}{ext or '.json'}"
    return path


def check_power_trace(options: "Options", topology: Optional["Topology"]) -> None:
    """The power_trace options, checked before training (ValueError naming
    the option and the fix); with the rank's topology, also that its file is
    not there already."""
    if options.power_trace is None:
        return
    if not isinstance(options.power_trace, str) or not options.power_trace:
        raise ValueError(f"power_trace is the file each rank writes its GPU's power to, e.g. "
                         f"'power.{{rank}}.json' (got {options.power_trace!r})")
    ms, seconds = options.power_trace_ms, options.power_trace_s
    if not isinstance(ms, (int, float)) or not 1 <= ms <= 10_000:
        raise ValueError(f"power_trace_ms is the sampling interval, 1..10000 ms; NVML's power "
                         f"reading is itself an average over tens of ms, so 10 (the default) "
                         f"is fine enough (got {ms!r})")
    if not isinstance(seconds, (int, float)) or not 0 < seconds <= 86_400:
        raise ValueError(f"power_trace_s is how long to record from the start, seconds > 0 and "
                         f"at most a day (got {seconds!r})")
    if seconds / (ms / 1000) > 8_640_000:
        raise ValueError(f"power_trace_s / power_trace_ms is {seconds / (ms / 1000):,.0f} "
                         f"samples, more than the 8,640,000 a trace holds; record for less "
                         f"time or less often")
    if topology is None:
        return
    path = power_trace_path(options, topology)
    if os.path.exists(path):
        raise ValueError(f"power_trace: {path} exists; joulepipe does not replace it. Move it, "
                         f"or give another path")


def check_max_slowdown(value: float) -> None:
    """The one rule on max_slowdown, the planner's own (PlanRequest::slowdown
    = max_slowdown - 1 in 0.._core.MAX_PLAN_SLOWDOWN)."""
    top = 1.0 + _core.MAX_PLAN_SLOWDOWN
    if not isinstance(value, (int, float)) or not 1.0 <= value <= top:
        raise ValueError(f"max_slowdown is the iteration time the plan may take, a multiple of "
                         f"today's: 1 (no slower, the default) to {top:g}, e.g. 1.05 for 5 % "
                         f"slower (got {value!r})")


@dataclass
class Topology:
    """Where this rank sits in the job."""
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    dp_rank: int = 0
    pp_rank: int = 0
    tp_rank: int = 0
    dp: int = 1
    pp: int = 1
    tp: int = 1


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


def _method_of(sources: List[str]) -> str:
    """The flag's word for a window whose GPUs' energy came from `sources`
    (one word per distinct source, in order)."""
    words: List[str] = []
    for s in sources:
        w = _METHOD_WORDS.get(s, s)
        if w not in words:
            words.append(w)
    return "+".join(words)


def _window_parts(rank: Optional[int], time_s: float, energy_j: Optional[float],
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
    # (_window_parts); "" without a measurement.
    method: str = ""

    def summary(self) -> str:
        parts = [f"joulepipe: iteration {self.iteration}"] + _window_parts(
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
        parts = [f"joulepipe: {self.kind} {where}"] + _window_parts(
            self.rank, self.time_s, self.energy_j, self.avg_power_w, self.approximate, "J/GPU",
            self.method)
        return " | ".join(parts)


class Session:
    def __init__(self, options: Options, topology: Topology, exchange: Any,
                 log: Callable[[str], None], writer: Any = None) -> None:
        if options.mode not in MODES[1:]:
            raise ValueError(f"mode must be one of measure, profile, optimize (got {options.mode!r})")
        check_max_slowdown(options.max_slowdown)
        check_power_trace(options, topology)
        last = options.last_iteration
        if last is not None and (not isinstance(last, int) or isinstance(last, bool) or last < 0):
            raise ValueError(f"last_iteration is the last training step's number (as the loop "
                             f"counts them, from 0), a whole number >= 0 (got {last!r})")
        self.options = options
        self.topo = topology
        from joulepipe._exchange import Link

        self._link = Link(exchange, self._step)
        self._log_fn = log
        self._writer = writer
        self.records: List[IterationRecord] = []
        # Called with each iteration's record as it is finished, in order
        # (the integrations say its line): at once with host-timed windows,
        # once the device has run the step with the stream's (_settle_steps).
        self.on_record: Optional[Callable[[IterationRecord], None]] = None
        self.applied_plans: List[Dict[str, Any]] = []
        self.failure: Optional[str] = None

        # Iteration state.
        self._iteration = 0
        self._number: Optional[int] = None  # the framework's count of the open iteration
        self._last_ended: Optional[int] = None  # the number of the last iteration ended
        self._pipeline_done = False
        self._off_shape = False  # this iteration's shape is not the job's (set_shape)
        self._said_over_limit = False
        self._hooks_in_shape: Any = None  # the hooks, while off-shape
        self._open = False
        self._t0 = 0.0
        self._pipeline_time = 0.0
        self._observed: List[Tuple[str, int, int]] = []
        self._recording = True  # the first training iteration's order
        self._schedule_order: Optional[List[Tuple[str, int, int]]] = None
        self._running_version = 0
        # The rounds' state (the Link's thread only; see _step).
        self._plan_started = False   # decided from the rounds' rows
        self._received_version = 0   # the newest version rank 0 announced
        self._told_planning_failed = False
        self._my_info: Any = None
        self._start_failure: Optional[str] = None
        self._remote_job: Optional[str] = None  # rank 0: the job's id at the service
        # The rank's CoordinatedPlan (optimize mode): in-process for embedded
        # coordination, fed by the rounds; the service's once the job is there.
        self._coordinated: Any = None
        self._hooks: Any = None  # what the instruction hooks drive: _coordinated, else _agent
        self._baseline_energy_j: Optional[float] = None  # embedded: all-max clocks' energy
        self._shared = False  # this rank gave its profile (training thread)
        # Seconds the training thread spent on coordination per iteration.
        self.coordination_wait_s: List[float] = []
        self._predicted_saving: Optional[float] = None
        self._shape: Optional[Dict[str, Any]] = None  # the job's: schedule, microbatches, chunks
        self._expected_shape: Optional[Dict[str, Any]] = None  # expect_shape()'s
        self._plan_shape: Optional[Dict[str, Any]] = None  # a plan file's
        self._phase = "measure"  # measure | profile | planning | execute
        self._coordinator: Any = None  # rank 0, embedded: the job's CoordJob
        self.refused_reports = 0  # rank 0: round reports the policy refused (dropped)
        self._profiler: Any = None
        self._sweep_clocks = 0  # clocks the profiler visits (profile phase)
        self._last_rows: List[Any] = []  # the newest round's RoundRows (the Link's thread)
        self._agent: Any = None
        self._monitor: Any = None
        self._last_applied = 0
        self._file = None
        self._file_jsonl = False  # the iteration log's format: JSON lines, else CSV
        self._closed = False
        self._plan_waits = False  # a plan file's CoordinatedPlan, started at the first iteration
        self.phase_records: List[PhaseRecord] = []
        self._phase_kind: Optional[str] = None  # the open phase_begin()'s
        self._phase_depth = 0  # phase_begin calls inside the open phase
        self._phase_t0 = 0.0

        self._gpu = self._find_gpu()
        if self._gpu is not None:
            try:
                # A step is often shorter than the energy counter's period:
                # its line integrates power samples taken during it
                # (monitor.hpp, short_windows_sampled), never one reading
                # taken after the step, when default clocks are back.
                self._monitor = _core.Monitor(gpus=[self._gpu["index"]],
                                              sampling_period_s=STEP_SAMPLING_S,
                                              short_windows_sampled=True)
            except Exception as error:
                self._note(f"no GPU energy for this rank ({error}); logging time only")
        # Steps timed on the device (_open_step_meter): the ones ended on the
        # host and not yet finished there, as (tag, record, tokens).
        self._step_meter: Any = None
        self._step_tag = 0
        self._unsettled: List[Tuple[int, IterationRecord, float]] = []
        self._open_step_meter()
        self._trace: Any = None
        self._trace_writer: Optional[threading.Thread] = None
        self._start_power_trace()
        if options.log_path:
            self._open_log(options.log_path.replace("{rank}", str(topology.rank)))
        if options.mode in ("profile", "optimize"):
            self._start_agent()

    @property
    def schedule_order(self) -> Optional[List[Tuple[str, int, int]]]:
        """The first training iteration's forwards and backwards on this rank,
        in the order they ran: ("forward" | "backward", microbatch, chunk).
        None before that iteration ends."""
        return list(self._schedule_order) if self._schedule_order is not None else None

    # ---- setup ---------------------------------------------------------------

    def _note(self, line: str) -> None:
        try:
            self._log_fn(f"joulepipe [rank {self.topo.rank}]: {line}")
        except Exception:
            _logger.debug("_note: error ignored", exc_info=True)

    def _start_power_trace(self) -> None:
        if not self.options.power_trace:
            return
        path = power_trace_path(self.options, self.topo)
        if self._gpu is None:
            self._note(f"power_trace: no GPU to trace; {path} is not written")
            return
        try:
            self._trace = _core.PowerTrace(self._gpu["nvml_index"],
                                           interval_s=self.options.power_trace_ms / 1000,
                                           duration_s=self.options.power_trace_s)
        except Exception as error:
            self._note(f"power_trace: cannot record this GPU's power ({error}); {path} is not "
                       "written, training goes on")
            return
        self._note(f"recording GPU {self._gpu['index']}'s power every "
                   f"{self.options.power_trace_ms:g} ms for {self.options.power_trace_s:g} s "
                   f"into {path}")

    def _write_power_trace(self, background: bool = False) -> None:
        """Once the trace is over (on a thread: a day's trace is seconds of
        writing, not the training thread's) or at close (at once, after a
        write still running): the file, and one line."""
        trace, self._trace = self._trace, None
        if trace is None:
            writer, self._trace_writer = self._trace_writer, None
            if writer is not None and not background:
                writer.join(timeout=120)
            return
        if background:
            self._trace_writer = threading.Thread(target=self._write_trace_file, args=(trace,),
                                                  name="joulepipe-power-trace", daemon=True)
            self._trace_writer.start()
        else:
            self._write_trace_file(trace)

    def _write_trace_file(self, trace: Any) -> None:
        path = power_trace_path(self.options, self.topo)
        try:
            got = trace.write(path, self.topo.rank, self._gpu.get("name", "") if self._gpu else "")
        except Exception as error:
            self._note(f"power_trace: could not write {path}: {error}")
            return
        errors = f", {got['read_errors']} failed reads" if got["read_errors"] else ""
        pattern = power_trace_path(self.options, self.topo, rank="*")
        join = (f"; the job's power: joulepipe power --join {pattern}" if self.topo.rank == 0
                else "")
        self._note(f"power trace written to {path}: {got['samples']} samples over "
                   f"{got['seconds']:.1f} s, {got['step_ends']} step ends{errors}{join}")

    def _find_gpu(self) -> Optional[Dict[str, Any]]:
        try:
            devices = _core.gpus()
        except Exception as error:
            self._note(f"no GPU energy or clock control: {error}")
            return None
        if not devices:
            self._note("no GPU is visible; logging time only")
            return None
        try:
            if _core.nvml_simulated():
                self._note(_core.nvml_methodology().rstrip("."))
        except Exception:
            _logger.debug("_find_gpu: error ignored", exc_info=True)
        index = self.topo.local_rank
        try:
            import torch
            if torch.cuda.is_available():
                index = torch.cuda.current_device()
        except Exception:
            _logger.debug("_find_gpu: error ignored", exc_info=True)
        for device in devices:
            if device["index"] == index:
                return device
        return devices[index % len(devices)]

    def _start_agent(self) -> None:
        if self._gpu is None:
            self._fail("no GPU to control")
            return
        control = self.options.control
        socket = self.options.daemon_socket or "/run/joulepiped.sock"
        if control == "auto":
            control = "daemon" if os.path.exists(socket) else "nvml"
        try:
            self._agent = _core.Agent(nvml_index=self._gpu["nvml_index"], control=control,
                                      daemon_socket=socket)
        except Exception as error:
            self._fail(f"the clock agent could not start: {error}")
            return
        self._control = control
        self._follow_stream()
        self._set_hooks(self._agent)
        # From here on the GPU's clocks may change: every way out of the
        # process gives them back (_guard.py).
        _guard.watch(self)
        if self.options.plan:
            if self.options.mode != "optimize":
                self._fail(f"a plan file is applied in optimize mode only (mode is "
                           f"{self.options.mode!r})")
                return
            self._apply_plan_file(self.options.plan)
            return
        if self.options.mode == "optimize" and not self.options.coordinator:
            # Embedded coordination: rank 0's plans reach this rank through
            # the rounds (offer()); the native object applies them at a step
            # boundary, in the loop's order (runtime/coordinated_plan.hpp).
            self._coordinated = _core.CoordinatedPlan.in_process(
                self._agent, self.topo.rank, through=control, **self._grid_timing())
            self._set_hooks(self._coordinated)
        if self.options.profile:
            try:
                with open(self.options.profile) as f:
                    # Bounded like every file joulepipe reads (model::ReadWholeFile):
                    # profile=/dev/zero must not read forever.
                    self._profile_csv = f.read(MAX_PROFILE_CHARS + 1)
            except (OSError, UnicodeDecodeError) as error:
                why = getattr(error, "strerror", None) or str(error)
                self._fail(f"cannot read the profile {self.options.profile}: {why}")
                return
            if len(self._profile_csv) > MAX_PROFILE_CHARS:
                self._fail(f"the profile {self.options.profile} is larger than 256 MiB; give "
                           "the path of a profile CSV (joulepipe's are far smaller)")
                return
            self._phase = "profile"  # done at once: plans at the first boundary
            return
        clocks = _core.candidate_clocks(self._gpu["supported_sm_mhz"], self.options.profile_floor,
                                        self.options.profile_stride_mhz)
        self._profiler = _core.InSituProfiler(self.topo.pp_rank, clocks, gpu=self._gpu["name"])
        self._agent.set_profiler(self._profiler)
        self._phase = "profile"
        least, most = _core.sweep_iterations(clocks)
        self._note(f"profiling stage {self.topo.pp_rank} at {len(clocks)} clocks "
                   f"({clocks[0]}..{clocks[-1]} MHz) through {control}: the sweep takes "
                   f"{least} iterations, up to {most} where noisy clocks are repeated (a "
                   f"larger profile_stride_mhz, --joulepipe-profile-stride-mhz, visits fewer "
                   f"clocks)")
        self._sweep_clocks = len(clocks)
        if self.options.mode == "profile" and not self.options.profile_out and self.topo.rank == 0:
            self._note("profile mode without profile_out: the measured profile is planned and "
                       "its saving logged, but not written; pass profile_out=PATH "
                       "(--joulepipe-profile-out) to keep it")

    def _training_stream(self) -> Tuple[Optional[int], Optional[str]]:
        """The CUstream the training launches on: options.stream, else
        PyTorch's current stream when CUDA is available; (None, why) on a
        broken CUDA set-up, (None, None) without CUDA."""
        if self.options.stream is not None:
            return int(self.options.stream), None
        # Only a program that imported torch launches on torch's streams
        # (and importing it here would cost seconds).
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_available():
                return int(torch.cuda.current_stream().cuda_stream), None
        except Exception as error:  # a broken CUDA set-up: the host's points
            return None, f"no CUDA stream ({error})"
        return None, None

    def _open_step_meter(self) -> None:
        """Iteration lines where the GPU is: with the training's stream, each
        step's time and energy are the device's, between CUDA events at its
        begin and end (runtime/device_meter.hpp), so a host that runs ahead
        does not cut them where it was. Without one, the monitor's windows at
        the host's points."""
        if self._gpu is None or self._monitor is None:
            return
        stream, _ = self._training_stream()
        if stream is None:
            return
        try:
            self._step_meter = _core.StepMeter(stream, self._gpu["nvml_index"],
                                               poll_period_s=STEP_METER_POLL_S)
        except Exception as error:
            self._note(f"iteration lines are timed at the host's points: {error}")

    def _follow_stream(self) -> None:
        """Clocks where the GPU is: the agent marks each hook on the training's
        stream (runtime/device_markers.hpp) when there is one, and profile mode
        times each instruction there (runtime/device_meter.hpp); otherwise the
        host's points, said once."""
        stream, broken = self._training_stream()
        if broken is not None:
            self._note(f"clocks change at the host's hook points: {broken}")
            return
        if stream is None:
            if self.options.mode != "measure":
                self._note("no CUDA stream (no CUDA here): clocks change at the host's hook "
                           "points (profile rows are timed there too), exact where the host "
                           "waits for the GPU at each instruction")
            return
        ok, why = self._agent.set_stream(int(stream))
        if not ok:
            self._note(f"clocks change at the host's hook points: {why}")

    def _apply_plan_file(self, path: str) -> None:
        """optimize with a plan file: this rank's stage plan from the first
        iteration on (no profiling, no coordination), applied by the native
        CoordinatedPlan (runtime/coordinated_plan.hpp), which says so."""
        try:
            plan = _core.Plan.read(path)
        except (OSError, ValueError) as error:
            self._fail(f"cannot use the plan {path}: {error}")
            return
        self._plan_shape = {"schedule": plan.schedule, "microbatches": plan.microbatches,
                            "chunks": plan.chunks}
        # A grid plan's offset between pipelines and stop ramp are the native
        # object's to time (runtime/grid_timing.hpp), and to say.
        self._coordinated = _core.CoordinatedPlan.from_plan(
            self._agent, plan, path, self.topo.rank, stage=self.topo.pp_rank,
            stages=self.topo.pp, through=self._control, **self._grid_timing())
        self._set_hooks(self._coordinated)
        self._phase = "execute"
        # Started at the first iteration, once set_shape has checked the
        # plan against the loop's shape: a plan refused then was never said
        # to be applied, and no step of it ran.
        self._plan_waits = True

    _CSV_HEADER = ("iteration,time_s,pipeline_time_s,energy_j,avg_power_w,tokens_per_s,"
                   "j_per_token,approximate,plan_version,clocks_applied\n")

    def _open_log(self, path: str) -> None:
        """Appends: a resumed run continues its log, never truncates it. A
        CSV gets its header once, and one with other columns is left alone."""
        jsonl = path.endswith(".jsonl")
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            # Private to the user, like every file joulepipe creates
            # (model::kPrivateFileMode); an existing log keeps its mode.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            if not jsonl and os.fstat(fd).st_size > 0:
                first = os.pread(fd, len(self._CSV_HEADER), 0).decode("utf-8", "replace")
                if first != self._CSV_HEADER:
                    os.close(fd)
                    self._note(f"the iteration log {path} is there with other columns; it is "
                               "left as it is and no log is written: name another file")
                    return
                header = False
            else:
                header = not jsonl
            self._file = os.fdopen(fd, "w", buffering=1)
            self._file_jsonl = jsonl
        except OSError as error:
            self._note(f"cannot write the iteration log {path}: {error.strerror}")
            return
        if header:
            self._file.write(self._CSV_HEADER)

    def _fail(self, why: str) -> None:
        """Default clocks from now on, said once."""
        if self.failure is None:
            self.failure = why
            self._note(f"{why}; this rank runs at default clocks, training goes on")
        # The phase stays: a failed rank keeps taking part in the rounds and
        # exchanges (the other ranks wait for it there), it only never sets
        # clocks again.
        if self._coordinated is not None and not self.options.coordinator:
            # Embedded plans or a plan file (not the service's, which
            # closes itself): no plan waiting in the native object may be
            # applied.
            try:
                self._coordinated.close()
            except Exception:
                _logger.debug("_fail: error ignored", exc_info=True)
            self._coordinated = None
            self._set_hooks(self._agent)
        if self._agent is not None:
            try:
                self._agent.disable()
            except Exception:
                _logger.debug("_fail: error ignored", exc_info=True)

    def step_raised(self, error: BaseException) -> None:
        """An exception left the step (inside an instruction or between them):
        the plan's instructions did not all run, and that is why."""
        if not self._open or self._off_shape or self._agent is None:
            return
        if self.options.mode == "measure":
            return  # no clock to stop: the step's line says what it measured
        where = f"step {self._iteration}"
        self._fail(f"an exception ended {where} early ({type(error).__name__}: {error}); the "
                   "plan's clocks stop with it")

    # ---- hooks ---------------------------------------------------------------

    def expect_shape(self, schedule: str, microbatches: int, chunks: int) -> None:
        """The shape the job will settle on (e.g. the final batch of a
        batch-size rampup), before its first iteration: iterations of
        another shape until then are off-shape (set_shape)."""
        self._expected_shape = {"schedule": schedule, "microbatches": microbatches,
                                "chunks": chunks}

    def _set_hooks(self, hooks: Any) -> None:
        """What the instruction hooks drive from the next in-shape iteration."""
        if self._off_shape:
            self._hooks_in_shape = hooks
        else:
            self._hooks = hooks

    def set_shape(self, schedule: str, microbatches: int, chunks: int) -> None:
        """The pipeline schedule this iteration runs (from the schedule call).

        The job's shape is the one expect_shape() named, else the first
        iteration's; a plan file for another is refused then (this rank runs
        at default clocks). An iteration of another shape (a batch-size rampup's smaller batch,
        a loop that changes its microbatches) is off-shape: measured and
        logged, at default clocks, without the instruction hooks or the
        coordination rounds (which run on every rank alike: the number of
        microbatches is the job's); the plan applies again from the first
        iteration back in shape. Each change is said once."""
        shape = {"schedule": schedule, "microbatches": microbatches, "chunks": chunks}
        if self._shape is None:
            self._shape = self._expected_shape or shape
            plan = self._plan_shape
            if plan is not None and plan != self._shape and self.failure is None:
                settles = ("this loop runs" if self._expected_shape is None
                           else "this job's batch settles at")
                self._fail(f"the plan {self.options.plan} is for {plan['schedule']} with "
                           f"{plan['microbatches']} microbatches and {plan['chunks']} chunks; "
                           f"{settles} {self._shape['schedule']} with "
                           f"{self._shape['microbatches']} microbatches and "
                           f"{self._shape['chunks']} chunks")
        off = shape != self._shape
        if off == self._off_shape:
            return
        self._off_shape = off
        planned = self._shape
        quiet = self.options.mode == "measure"  # no clock to speak of
        if off:
            self._hooks_in_shape, self._hooks = self._hooks, None
            if quiet:
                return
            whose = f"the plan {self.options.plan} is" if self.options.plan else "joulepipe plans"
            self._note(f"this iteration runs {schedule} with {microbatches} microbatches and "
                       f"{chunks} chunk(s); {whose} for {planned['schedule']} with "
                       f"{planned['microbatches']} microbatches and {planned['chunks']} "
                       "chunk(s): such iterations run at default clocks, measured, until the "
                       "shape is back (a batch-size rampup reaching its final batch)")
        else:
            self._hooks, self._hooks_in_shape = self._hooks_in_shape, None
            if self.failure is None and not quiet:
                self._note(f"the iterations are back to {planned['microbatches']} "
                           "microbatches: joulepipe applies again from this one")

    def iteration_begin(self, number: Optional[int] = None) -> None:
        """`number`: the iteration as the training framework counts it (its
        logs, its TensorBoard steps, a resume included); the session's own
        count, from 0, when None. Coordination always uses its own count."""
        if self._open:
            self.iteration_end()
        if self._plan_waits:
            self._plan_waits = False
            if self._coordinated is not None:  # not refused by set_shape
                try:
                    self._coordinated.start()
                except Exception as error:
                    self._fail(f"cannot start the plan {self.options.plan}: {error}")
                self._drain_coordinated_log()  # the line that says what runs, or why not
        self._open = True
        self._pipeline_done = False
        self._number = number
        if self._step_meter is not None:
            self._step_meter.mark(True, self._step_tag)
        else:
            self._window_begin("joulepipe.iteration")
        self._t0 = time.perf_counter()
        if self._off_shape:
            return
        if self._coordinated is not None:
            # A waiting plan first, then the agent's; then a grid plan's
            # timing (its stop ramp, this pipeline's offset).
            self._coordinated.on_step_begin(
                number if number is not None else self._iteration)
        elif self._agent is not None:
            self._agent.on_step_begin()

    def _grid_timing(self) -> Dict[str, Any]:
        """What the native plan object needs to time a grid plan's levers:
        this rank's pipeline and the job's last iteration."""
        return {"pipeline": self.topo.dp_rank, "last_iteration": self.options.last_iteration}

    # The instruction hooks are the hot path (bench/python_hooks.py): a flag
    # test, then one native call.

    def forward_begin(self, microbatch: int, chunk: int) -> None:
        if self._recording:
            self._observed.append(("forward", microbatch, chunk))
        if self._hooks is not None:
            self._hooks.on_instruction_begin(_FORWARD, microbatch, chunk)

    def forward_end(self, microbatch: int, chunk: int) -> None:
        if self._hooks is not None:
            self._hooks.on_instruction_end(_FORWARD, microbatch, chunk)

    def backward_begin(self, microbatch: int, chunk: int) -> None:
        if self._recording:
            self._observed.append(("backward", microbatch, chunk))
        if self._hooks is not None:
            self._hooks.on_instruction_begin(_BACKWARD, microbatch, chunk)

    def backward_end(self, microbatch: int, chunk: int) -> None:
        if self._hooks is not None:
            self._hooks.on_instruction_end(_BACKWARD, microbatch, chunk)

    def pipeline_end(self) -> None:
        """The iteration's forwards and backwards are done (before the optimizer)."""
        if not self._open:
            return
        self._pipeline_done = True
        self._pipeline_time = time.perf_counter() - self._t0
        if self._off_shape:
            self._observed = []  # the order recorded is an in-shape iteration's
            return
        if self._coordinated is not None:
            self._coordinated.on_step_end()  # the agent's, then this iteration's report
        elif self._agent is not None:
            self._agent.on_step_end()
        if self._recording:
            self._recording = False
            self._schedule_order = list(self._observed)
            self._observed = []
        try:
            self._coordinate()
        except Exception as error:  # never into training
            self._fail(f"coordination failed: {type(error).__name__}: {error}")

    @property
    def pipeline_done(self) -> bool:
        """An iteration is open and its forwards and backwards are done: what
        is left of it is the optimizer step."""
        return self._open and self._pipeline_done

    def _over_limit(self, energy: Optional[float], elapsed: float, what: str) -> bool:
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

    def _fell_back(self) -> bool:
        try:
            return self._agent is not None and self._agent.fallback_reason is not None
        except Exception:
            return False

    def _window_begin(self, name: str) -> None:
        """Opens the monitor's window `name` (nothing without a monitor)."""
        if self._monitor is not None:
            try:
                self._monitor.begin(name)
            except Exception:
                _logger.debug("_window_begin: error ignored", exc_info=True)

    def _window_end(self, name: str) -> Tuple[Optional[float], bool, str]:
        """The GPU energy of the monitor's window `name`, whether it is
        approximate and how it was measured (_window_parts); (None, False,
        "") without a monitor or on an error."""
        if self._monitor is None:
            return None, False, ""
        try:
            m = self._monitor.end(name)
            return m.gpu_energy_j, m.approximate, _method_of(m.gpu_sources)
        except Exception:
            _logger.debug("_window_end: error ignored", exc_info=True)
            return None, False, ""

    def phase_begin(self, kind: str) -> None:
        """Work between training iterations starts that is reported apart
        from them (`kind`: "evaluation", "checkpoint"): an open iteration
        ends first (without its line: the integration says it). A phase
        begun inside an open one is part of it."""
        if self._phase_kind is not None:
            self._phase_depth += 1
            return
        if self._open:
            self.iteration_end()
        self._phase_kind = kind
        self._phase_depth = 0
        self._window_begin("joulepipe.phase")
        self._phase_t0 = time.perf_counter()

    def phase_end(self) -> Optional[PhaseRecord]:
        """Ends the phase phase_begin opened; its record (None for the end
        of a nested one, or with no phase open)."""
        if self._phase_kind is None:
            return None
        if self._phase_depth > 0:
            self._phase_depth -= 1
            return None
        elapsed = time.perf_counter() - self._phase_t0
        energy, approximate, method = self._window_end("joulepipe.phase")
        kind, self._phase_kind = self._phase_kind, None
        record = PhaseRecord(
            kind=kind, after_iteration=self._last_ended,
            time_s=elapsed, energy_j=energy,
            avg_power_w=energy / elapsed if energy is not None and elapsed > 0 else None,
            approximate=self._over_limit(energy, elapsed, f"a {kind}") or approximate,
            rank=self.topo.rank if self.topo.world_size > 1 else None,
            gpus=max(1, self.topo.world_size), method=method)
        self.phase_records.append(record)
        self._write_phase(record)
        return record

    def iteration_end(self) -> Optional[IterationRecord]:
        if not self._open:
            return None
        self._open = False
        elapsed = time.perf_counter() - self._t0
        on_device = self._step_meter is not None
        if on_device:
            self._step_meter.mark(False, self._step_tag)
            energy, approximate, method = None, False, ""
        else:
            energy, approximate, method = self._window_end("joulepipe.iteration")
        self._drain_coordinated_log()  # the plan this iteration ran, before its record
        tokens = self.options.tokens_per_iteration
        stats = self._agent.stats() if self._agent is not None else {}
        applied = stats.get("applied", 0)
        number = self._number
        record = IterationRecord(
            iteration=self._iteration if number is None else number, time_s=elapsed,
            pipeline_time_s=self._pipeline_time, energy_j=None, avg_power_w=None,
            tokens_per_s=None, j_per_token=None, approximate=False,
            # No plan ran when the agent fell back (its line said why).
            plan_version=(0 if self._off_shape or self._fell_back() else self._running_version),
            clocks_applied=applied - self._last_applied,
            predicted_saving=self._predicted_saving,
            rank=self.topo.rank if self.topo.world_size > 1 else None,
            gpus=max(1, self.topo.world_size))
        self._last_applied = applied
        self._last_ended = record.iteration
        if self._trace is not None:
            self._trace.mark_step_end(record.iteration)
            if self._trace.done:
                self._write_power_trace(background=True)
        self._iteration += 1
        if on_device:
            self._unsettled.append((self._step_tag, record, tokens))
            self._step_tag = (self._step_tag + 1) & 0xFFFFFFFF
            finished = self._settle_steps(STEP_SETTLE_S)
        else:
            finished = [self._finish(record, tokens, elapsed, energy, approximate, method)]
        self._drain_agent_log()
        self._say_sweep_progress()
        return finished[-1] if finished else None

    def _finish(self, record: IterationRecord, tokens: float, time_s: float,
                energy: Optional[float], approximate: bool, method: str) -> IterationRecord:
        """Completes an iteration's record with its measured time and energy,
        keeps and writes it, and hands it to on_record."""
        record.time_s = time_s
        record.energy_j = energy
        record.avg_power_w = energy / time_s if energy is not None and time_s > 0 else None
        record.tokens_per_s = tokens / time_s if tokens and time_s > 0 else None
        record.j_per_token = (energy * self.topo.world_size / tokens
                              if tokens and energy is not None else None)
        record.approximate = self._over_limit(energy, time_s, "an iteration") or approximate
        record.method = method
        self.records.append(record)
        self._write(record)
        if self.on_record is not None:
            try:
                self.on_record(record)
            except Exception:
                _logger.debug("on_record: error ignored", exc_info=True)
        return record

    def _settle_steps(self, wait_s: float) -> List[IterationRecord]:
        """Finishes the records of the steps the device has run (in order),
        with the device's time and energy; waits up to `wait_s` only when
        the device is already past the newest step's end (never for the
        GPU). A step the meter could not mark keeps its host time and no
        energy."""
        meter = self._step_meter
        try:
            meter.caught_up(wait_s)
            steps = meter.take()
        except Exception:
            _logger.debug("_settle_steps: error ignored", exc_info=True)
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

    def _drain_steps(self) -> None:
        """close(): lets the device finish the steps still queued (at most
        STEP_DRAIN_S), then finishes every record left, host-timed without
        energy where the device did not get there."""
        if self._step_meter is None:
            return
        deadline = time.monotonic() + STEP_DRAIN_S
        while self._unsettled and time.monotonic() < deadline:
            self._settle_steps(0.0)
            if self._unsettled:
                time.sleep(STEP_METER_POLL_S)
        if self._unsettled:
            self._note(f"{len(self._unsettled)} iteration(s) did not finish on the GPU within "
                       f"{STEP_DRAIN_S:.0f} s of the end: their lines have the host's time "
                       "and no energy")
        while self._unsettled:
            _, record, tokens = self._unsettled.pop(0)
            self._finish(record, tokens, record.time_s, None, False, "")

    # Iterations between two progress lines of a running profile sweep.
    SWEEP_PROGRESS_EVERY = 10

    def _say_sweep_progress(self) -> None:
        """Every SWEEP_PROGRESS_EVERY iterations of a sweep, one line per stage
        (its first pipeline's rank): how far it is, so a long sweep is not
        silence."""
        ran = self._unfinished_sweep_iterations()
        if self.topo.dp_rank != 0 or self.topo.tp_rank != 0 or not ran:
            return
        if ran % self.SWEEP_PROGRESS_EVERY:
            return
        clocks = self._sweep_clocks
        self._note(f"profiling stage {self.topo.pp_rank}: {ran} iterations so far; the sweep "
                   f"visits up to {clocks} clocks, one per iteration (fewer when lower clocks "
                   f"stop paying, more when a noisy clock is repeated or an implausible one "
                   f"measured again), at least {self._sweep_left()} more")

    # ---- coordination (at the iteration boundary) -----------------------------
    #
    # The training thread posts one row per iteration to the Link and takes
    # what the rounds decided; the rounds themselves (the side group's
    # collectives, rank 0's planning and its coordinator) run on the Link's
    # background thread (_step), so training never waits on another rank.
    # _step's state (_plan_started, _received_version, _my_info, the
    # coordinator's creation) belongs to that thread.

    def _row(self) -> List[float]:
        """This rank's row of the round (protocol/round_row.hpp), as the
        numbers the side group gathers; rank 0 fills in the round's
        decisions in _step."""
        return _core.RoundRow(iteration=self._iteration, pipeline_time_s=self._pipeline_time,
                              profile_shared=self._shared,
                              running_version=self._running_version,
                              sweep_iterations_left=max(0, self._sweep_left())).to_floats()

    def _ready_to_share(self) -> bool:
        """This rank's part of the profile is complete (or it has none to give)."""
        if self._phase != "profile" or self.failure is not None or self._profiler is None:
            return True
        return bool(self._profiler.done)

    def _share(self) -> Dict[str, Any]:
        report = None
        if self._profiler is not None and self.failure is None:
            report = self._profiler.report().to_dict()
        if self._agent is not None:
            self._agent.disable()  # default clocks while rank 0 plans
        self._phase = "planning"
        return {"report": report, "rank": self.topo.rank, "dp_rank": self.topo.dp_rank,
                "pp_rank": self.topo.pp_rank, "tp_rank": self.topo.tp_rank,
                "available_mhz": list(self._gpu["supported_sm_mhz"]) if self._gpu else []}

    def _coordinate(self) -> None:
        if self.options.mode == "measure" or self.options.plan:
            return
        began = time.perf_counter()
        info = None
        if not self._shared and self._ready_to_share():
            info = self._share()
            self._shared = True
        self._link.post(self._row(), info)
        self._take_actions()
        self.coordination_wait_s.append(time.perf_counter() - began)

    def _take_actions(self) -> None:
        """What the rounds decided, on the training thread."""
        for kind, value in self._link.take():
            if kind == "note":
                self._note(value)
            elif kind == "failed":
                self._fail(f"coordination between the ranks stopped ({value})")
            elif kind == "planning_failed":
                self._fail("planning failed on rank 0 (its log says why)" if self.topo.rank
                           else f"planning failed ({value})")
            elif kind == "plans":
                self._receive_plans(value)
            elif kind == "remote":
                self._join_remote(value)

    def _step(self, row: List[float], info: Any) -> List[Any]:
        """One round, on the Link's thread. Decisions come from the gathered
        rows alone, which every rank holds alike, so every rank enters the
        same collectives in the same round."""
        if info is not None:
            self._my_info = info
        rank0 = self.topo.rank == 0
        actions: List[Any] = []
        mine = _core.RoundRow.from_floats(row)
        if rank0 and self._coordinator is not None:
            mine.announced_version = self._coordinator.plan_version
            actions += [("note", line) for line in self._coordinator.take_notes()]
        if rank0 and self._remote_job is not None:
            mine.announced_version = 1  # the job is at the service: every rank joins it
        if rank0 and self._planning_failure() is not None:
            mine.planning_failed = True
        rows = [_core.RoundRow.from_floats(r)
                for r in self._link.exchange.all_gather_rows(mine.to_floats())]
        self._last_rows = rows
        if not self._plan_started:
            if all(r.profile_shared for r in rows):
                self._plan_started = True
                everyone = self._link.exchange.all_gather_object(self._my_info)
                if rank0:
                    self._start_coordinator(everyone)
            return actions
        if rows[0].planning_failed and not self._told_planning_failed:
            self._told_planning_failed = True
            actions.append(("planning_failed", self._planning_failure()))
        if rank0 and self._coordinator is not None:
            self.refused_reports += self._coordinator.report_round(
                rows[0].iteration, [r.pipeline_time_s for r in rows], time.time())
        announced = rows[0].announced_version
        if announced > self._received_version:
            self._received_version = announced
            payload = None
            if rank0 and self._remote_job is not None:
                payload = ("remote", self._remote_job)
            elif rank0 and self._coordinator is not None:
                payload = ("plans", self._coordinator.offer())
            result = self._link.exchange.broadcast_object(payload)
            if result is not None:
                actions.append(tuple(result))
        return actions

    def _start_coordinator(self, everyone: List[Dict[str, Any]]) -> None:
        """Rank 0, on the Link's thread: the job's profile and its planning."""
        note = self._link.note
        if self.options.profile:
            csv = self._profile_csv
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
        shape = self._shape or {"schedule": "1f1b", "microbatches": 1, "chunks": 1}
        job_id = self.options.job_id or f"joulepipe-{os.getpid()}-{int(time.time())}"
        p_block_w = None if self.options.profile else self._unmeasured_p_block(merged)
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
        self._coordinator = job

    def _unmeasured_p_block(self, merged: Any) -> Optional[float]:
        """The library's P_block when the job measured none
        (runtime::UnmeasuredPBlock), said; None otherwise."""
        if self._gpu is None:
            return None
        fallback = _core.unmeasured_p_block(merged, self._gpu["name"])
        if fallback is None:
            return None
        watts, note = fallback
        self._link.note(note)
        return watts

    def _register_remote(self, job_id: str, shape: Dict[str, Any], p_block_w: Optional[float],
                         csv: str) -> None:
        """Rank 0, on the Link's thread: the job and its profile to `joulepipe
        serve`, through the runtime's client (timeouts, retries). Each rank
        then registers itself and fetches its plans (CoordinatedPlan)."""
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
            self._link.note(f"the coordinator {url} cannot plan this job: {error}; every rank "
                            "keeps default clocks")
            return
        self._link.note(f"job {job_id} registered at {url} with its profile ({rows} rows); "
                        "the service plans it and switches plans on stragglers")
        self._remote_job = job_id

    def _join_remote(self, job_id: str) -> None:
        """Every rank, training thread: run the service's plans for this rank.
        CoordinatedPlan registers the rank, fetches its plan versions off the
        training thread, reports each iteration and drives the agent."""
        if self.failure is not None or self._agent is None:
            return
        if self.options.mode != "optimize":
            self._note(f"the job is planned by {self.options.coordinator} as {job_id}; "
                       "profile mode keeps default clocks")
            return
        registration = {"dp_rank": self.topo.dp_rank, "pp_rank": self.topo.pp_rank,
                        "tp_rank": self.topo.tp_rank,
                        "available_frequencies": list(self._gpu["supported_sm_mhz"])}
        try:
            coordinated = _core.CoordinatedPlan(
                self._agent, self.options.coordinator, job_id, self.topo.rank,
                token=self.options.coordinator_token, registration=registration,
                start_wait_s=0.0, start_timeout_s=10.0, meter_nvml_index=self._gpu["nvml_index"],
                through=self._control, **self._grid_timing())
            coordinated.start()  # bounded: registration and one poll without waiting
        except Exception as error:
            self._fail(f"cannot join the coordinator's job {job_id}: {error}")
            return
        self._coordinated = coordinated
        self._set_hooks(coordinated)
        self._phase = "execute"
        self._drain_coordinated_log()

    def _drain_coordinated_log(self) -> None:
        c = self._coordinated
        if c is None:
            return
        for line in c.take_log():
            self._note(line)
        stats = c.stats()
        if stats["refusal"] and self.failure is None:
            self.failure = stats["refusal"]  # said once already (take_log)
        version = int(stats["running_version"])
        if version != self._running_version and version > 0:
            self._running_version = version
            energy = stats["running_predicted_energy_j"]
            if self._baseline_energy_j and energy:
                self._predicted_saving = 1.0 - energy / self._baseline_energy_j
            self.applied_plans.append({"version": version})

    def _planning_failure(self) -> Optional[str]:
        """Rank 0: why the job cannot be planned (None while fine)."""
        if self._start_failure is not None:
            return self._start_failure
        return (self._coordinator.failure or None) if self._coordinator is not None else None

    def _receive_plans(self, offered: Any) -> None:
        """Every rank: rank 0's newest plans, as the rounds delivered them:
        {"plans": {rank: the rank's plan as protocol JSON}, "baseline_energy_j"}.
        In optimize mode this rank's is offered to the native CoordinatedPlan,
        which applies it at the next step boundary (or refuses it, logged)."""
        mine = offered["plans"].get(self.topo.rank) if offered else None
        if mine is None:
            self._fail("the coordinator sent no plan for this rank")
            return
        self._baseline_energy_j = offered.get("baseline_energy_j") or None
        if self.failure is not None:
            return
        if self.options.mode == "profile":
            # Profile mode plans and reports; the clocks stay default.
            plan = json.loads(mine)
            self._running_version = int(plan["version"])
            energy = (plan.get("predicted") or {}).get("energy_j")
            if self._baseline_energy_j and energy:
                self._predicted_saving = 1.0 - energy / self._baseline_energy_j
            if self._running_version == 1 or not self.applied_plans:
                saving = (f"; predicted saving {self._predicted_saving * 100:.1f} % of GPU energy "
                          f"per iteration" if self._predicted_saving is not None else "")
                self._note(f"plan v{plan['version']} ready (not applied in profile mode): "
                           f"{plan['reason']}{saving}")
            self.applied_plans.append({"version": plan["version"], "reason": plan["reason"]})
            self._phase = "execute"
            return
        if self._coordinated is not None:
            self._coordinated.offer(mine)
        self._phase = "execute"

    # ---- output --------------------------------------------------------------

    def _write(self, r: IterationRecord) -> None:
        if self._file is not None:
            try:
                if self._file_jsonl:
                    self._file.write(json.dumps({"kind": "iteration", **r.__dict__}) + "\n")
                else:
                    def f(v):
                        return "" if v is None else (f"{v:.9g}" if isinstance(v, float) else str(v))
                    self._file.write(",".join(f(v) for v in (
                        r.iteration, r.time_s, r.pipeline_time_s, r.energy_j, r.avg_power_w,
                        r.tokens_per_s, r.j_per_token, int(r.approximate), r.plan_version,
                        r.clocks_applied)) + "\n")
            except Exception:
                _logger.debug("_write: error ignored", exc_info=True)
        if self._writer is not None and r.energy_j is not None:
            # joulepipe's own tags only: Megatron-LM's --log-energy writes
            # iter-energy/gpu and power/gpu, and two writers of one tag at
            # one step make a curve neither meant.
            try:
                for tag, value in tensorboard_scalars(r):
                    self._writer.add_scalar(tag, value, r.iteration)
            except Exception:
                _logger.debug("f: error ignored", exc_info=True)

    def _write_phase(self, r: PhaseRecord) -> None:
        """A phase goes to a .jsonl log (a CSV holds iterations only) and to
        TensorBoard at the step of the iteration before it."""
        if self._file is not None and self._file_jsonl:
            try:
                self._file.write(json.dumps(r.__dict__) + "\n")
            except Exception:
                _logger.debug("_write_phase: error ignored", exc_info=True)
        if self._writer is not None and r.energy_j is not None and r.after_iteration is not None:
            try:
                self._writer.add_scalar(f"joulepipe/{r.kind}-energy-per-gpu-j", r.energy_j,
                                        r.after_iteration)
                self._writer.add_scalar(f"joulepipe/{r.kind}-time-s", r.time_s, r.after_iteration)
            except Exception:
                _logger.debug("_write_phase: error ignored", exc_info=True)

    def _drain_agent_log(self) -> None:
        if self._agent is None:
            return
        for line in self._agent.take_log():
            self._note(line)
        reason = self._agent.fallback_reason
        if reason and self.failure is None:
            self.failure = reason  # the agent said it once already (take_log)

    def _take_actions_quietly(self) -> None:
        """At close: the rounds' last notes are still said; plans are not applied."""
        try:
            for kind, value in self._link.take():
                if kind == "note":
                    self._note(value)
        except Exception:
            _logger.debug("_take_actions_quietly: error ignored", exc_info=True)

    def _unfinished_sweep_iterations(self) -> Optional[int]:
        """The iterations a sweep still running on this rank has seen; None
        when there is none (no profiler, done, failed, past profiling)."""
        profiler = self._profiler
        if profiler is None or self.failure is not None or self._phase != "profile":
            return None
        try:
            return None if profiler.done else int(profiler.iterations)
        except Exception:
            _logger.debug("_unfinished_sweep_iterations: error ignored", exc_info=True)
            return None

    def _say_unfinished_sweep(self) -> None:
        """A job that ends while its profile sweep still runs gets no profile,
        no plan and no saving: say so, with what it would have needed."""
        ran = self._unfinished_sweep_iterations()
        if ran is None:
            return
        clocks = self._sweep_clocks
        partial = self._write_partial_profile(self._profiler)
        kept = (f"; the clocks this rank measured so far are in {partial} (stage "
                f"{self.topo.pp_rank} only, not a profile to plan with)" if partial else "")
        left = self._sweep_left()
        self._note(f"the profile sweep of stage {self.topo.pp_rank} had not finished when the job "
                   f"ended ({ran} iterations ran; it visits {clocks} clocks, one per iteration, "
                   f"and repeats noisy ones): no profile was written and nothing was planned; "
                   f"it needed at least {left} more: run at least {ran + left} iterations, "
                   f"more on a noisy machine{kept}")

    def _sweep_left(self) -> int:
        """The fewest iterations this rank's sweep still needs (0: none runs)."""
        profiler = self._profiler
        if profiler is None or self._phase != "profile":
            return 0
        try:
            return int(profiler.iterations_left)
        except Exception:
            _logger.debug("_sweep_left: error ignored", exc_info=True)
            return 0

    def _say_unfinished_job_profile(self) -> None:
        """Rank 0 writes the job's profile once every rank's sweep is done. A
        job that ends before then gets none: rank 0 says so too (its own
        sweep may have finished), with the most any rank still needed."""
        if self.topo.rank != 0 or self._profiler is None or self.failure is not None:
            return
        if self._plan_started or self.options.mode not in ("profile", "optimize"):
            return
        rows = self._last_rows
        # A row is posted at its iteration's pipeline end, before the sweep
        # counted that iteration: one less is left by the job's end.
        left = max([r.sweep_iterations_left - 1 for r in rows] + [self._sweep_left()]) if rows \
            else self._sweep_left()
        ran = self._iteration
        unfinished = sorted({i for i, r in enumerate(rows) if r.sweep_iterations_left >= 1})
        if self._sweep_left() > 0 and not any(r != 0 for r in unfinished):
            return  # rank 0's own line (_say_unfinished_sweep) said it all
        whose = (f"rank{'s' if len(unfinished) > 1 else ''} "
                 f"{', '.join(str(r) for r in unfinished)}" if unfinished else "a rank")
        target = (f" to {self.options.profile_out}" if self.options.profile_out else "")
        self._note(f"the job ended before every rank finished its profile sweep ({whose} had "
                   f"not; {ran} iterations ran): no profile was written{target} and nothing was "
                   f"planned; run at least {ran + max(left, 1)} iterations, more on a noisy "
                   f"machine")

    def _write_partial_profile(self, profiler: Any) -> Optional[str]:
        """With profile_out, what an unfinished sweep measured, beside it:
        PROFILE.stage<S>.partial.csv (never the profile_out file itself).
        Returns the path written, or None (nothing measured, not asked for,
        not writable)."""
        if not self.options.profile_out:
            return None
        base, ext = os.path.splitext(self.options.profile_out)
        path = f"{base}.stage{self.topo.pp_rank}.partial{ext or '.csv'}"
        try:
            csv = profiler.report().to_csv()
            profile = _core.Profile.parse(csv, "the partial profile")
            if profile.stages == 0:
                return None
            profile.write(path, overwrite=True)
        except Exception:
            _logger.debug("_write_partial_profile: nothing written", exc_info=True)
            return None
        return path

    def give_back(self, why: str) -> None:
        """Default clocks now and for the rest of this session (a signal, the
        process exiting). Safe between any two lines of training code: the
        closed agent's hooks are no-ops, nothing is removed that a hook
        reads, and nothing raises."""
        agent = self._agent
        if agent is None or agent.closed:
            return
        try:
            agent.close()  # default clocks back (synchronously), controller joined
        except Exception:
            _logger.debug("give_back: error ignored", exc_info=True)
        if self.failure is None:
            self.failure = f"{why}: default clocks restored"
        gpu = self._gpu["index"] if self._gpu else "?"
        self._note(f"{why}: GPU {gpu} is back at its default clocks")

    def close(self) -> None:
        """Ends the session (idempotent: the exit guard and an integration's
        own atexit hook may both close it, and its lines are said once)."""
        _guard.forget(self)
        if self._closed:
            return
        self._closed = True
        if self._open:
            self.iteration_end()
        self._drain_steps()
        self._phase_depth = 0
        self.phase_end()
        self._write_power_trace()
        self._say_unfinished_sweep()
        self._say_unfinished_job_profile()
        waits = sorted(self.coordination_wait_s)
        if waits:
            self._note(f"coordination took {waits[len(waits) // 2] * 1e6:.0f} us of the training "
                       f"thread per iteration (median; max {waits[-1] * 1e3:.2f} ms, "
                       f"{len(waits)} iterations)")
        try:
            self._link.close()  # the posted rounds first: they may still use the coordinator
        except Exception:
            _logger.debug("close: error ignored", exc_info=True)
        self._take_actions_quietly()
        if self._coordinator is not None:
            try:
                self._coordinator.close()
            except Exception:
                _logger.debug("close: error ignored", exc_info=True)
        if self._coordinated is not None:
            try:
                self._drain_coordinated_log()
                self._coordinated.close()
            except Exception:
                _logger.debug("close: error ignored", exc_info=True)
            self._coordinated = None
        if self._agent is not None:
            try:
                self._agent.close()  # default clocks back, controller joined
            except Exception:
                _logger.debug("close: error ignored", exc_info=True)
            self._agent = None
        if self._file is not None:
            self._file.close()
            self._file = None

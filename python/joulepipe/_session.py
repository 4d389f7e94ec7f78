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

import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from joulepipe import _core, _guard
from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug
from joulepipe._options import MODES, Options, Topology, check_max_slowdown, check_power_trace, \
    read_profile
from joulepipe._plan_run import PlanRun
from joulepipe._power_trace import PowerTraceRecorder
from joulepipe._records import IterationRecord, PhaseRecord, RecordLog
from joulepipe._rounds import Rounds
from joulepipe._device import find_gpu, follow_stream
from joulepipe._step_timing import StepTiming
from joulepipe._sweep import Sweep

_FORWARD, _BACKWARD = _core.Kind.FORWARD, _core.Kind.BACKWARD


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
        # The rank a record names, in a job of more than one.
        self._job_rank = topology.rank if topology.world_size > 1 else None
        self._log_fn = log
        self.records: List[IterationRecord] = []
        # Called with each iteration's record as it is finished, in order
        # (the integrations say its line): at once with host-timed windows,
        # once the device has run the step with the stream's (StepTiming).
        self.on_record: Optional[Callable[[IterationRecord], None]] = None
        self.failure: Optional[str] = None

        # Iteration state.
        self._iteration = 0
        self._number: Optional[int] = None  # the framework's count of the open iteration
        self._last_ended: Optional[int] = None  # the number of the last iteration ended
        self._pipeline_done = False
        self._off_shape = False  # this iteration's shape is not the job's (set_shape)
        self._hooks_in_shape: Any = None  # the hooks, while off-shape
        self._open = False
        self._t0 = 0.0
        self._pipeline_time = 0.0
        self._observed: List[Tuple[str, int, int]] = []
        self._recording = True  # the first training iteration's order
        self._schedule_order: Optional[List[Tuple[str, int, int]]] = None
        # The rank's plans (optimize mode): a plan file's, or the embedded
        # policy's fed by the rounds, or the service's once the job is there.
        self._plans = PlanRun(options, topology, self._note)
        self.applied_plans = self._plans.applied
        self._hooks: Any = None  # what the instruction hooks drive: the plan's, else _agent
        self._shared = False  # this rank gave its profile (training thread)
        # Seconds the training thread spent on coordination per iteration.
        self.coordination_wait_s: List[float] = []
        self._shape: Optional[Dict[str, Any]] = None  # the job's: schedule, microbatches, chunks
        self._expected_shape: Optional[Dict[str, Any]] = None  # expect_shape()'s
        self._plan_shape: Optional[Dict[str, Any]] = None  # a plan file's
        self._phase = "measure"  # measure | profile | planning | execute
        self._sweep: Optional[Sweep] = None  # the profile phase's sweep of clocks
        self._agent: Any = None
        self._control = ""  # how the agent sets clocks: "nvml" | "daemon"
        self._last_applied = 0
        self._closed = False
        self.phase_records: List[PhaseRecord] = []

        self._gpu = find_gpu(topology.local_rank, self._note)
        # The rounds (the Link's thread, _rounds.py); the training thread
        # posts a row per iteration and takes their actions.
        self._rounds = Rounds(options, topology, self._gpu, exchange, lambda: self._shape)
        self._link = self._rounds.link
        self._timing = StepTiming(self._gpu, options.stream, self._job_rank,
                                  max(1, topology.world_size), self._note, self._finish)
        self._trace = PowerTraceRecorder(options, topology, self._gpu, self._note)
        log_path = options.log_path.replace("{rank}", str(topology.rank)) \
            if options.log_path else None
        self._log = RecordLog(log_path, writer, self._note)
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
        follow_stream(self._agent, self.options.stream, self.options.mode, self._note)
        self._set_hooks(self._agent)
        # From here on the GPU's clocks may change: every way out of the
        # process gives them back (_guard.py).
        _guard.watch(self)
        if self.options.plan:
            if self.options.mode != "optimize":
                self._fail(f"a plan file is applied in optimize mode only (mode is "
                           f"{self.options.mode!r})")
                return
            try:
                self._plan_shape = self._plans.from_file(self._agent, self.options.plan, control)
            except (OSError, ValueError) as error:
                self._fail(f"cannot use the plan {self.options.plan}: {error}")
                return
            self._set_hooks(self._plans.native)
            self._phase = "execute"
            return
        if self.options.mode == "optimize" and not self.options.coordinator:
            self._plans.embedded(self._agent, control)
            self._set_hooks(self._plans.native)
        if self.options.profile:
            try:
                csv = read_profile(self.options.profile)
            except ValueError as error:
                self._fail(str(error))
                return
            self._rounds.profile_csv = csv
            self._phase = "profile"  # done at once: plans at the first boundary
            return
        self._sweep = Sweep(self._gpu, self.options, self.topo, self._note)
        self._agent.set_profiler(self._sweep.profiler)
        self._phase = "profile"
        self._sweep.say_start(control)

    def _fail(self, why: str) -> None:
        """Default clocks from now on, said once."""
        if self.failure is None:
            self.failure = why
            self._note(f"{why}; this rank runs at default clocks, training goes on")
        # The phase stays: a failed rank keeps taking part in the rounds and
        # exchanges (the other ranks wait for it there), it only never sets
        # clocks again.
        if self._plans.native is not None and not self.options.coordinator:
            # Embedded plans or a plan file (not the service's, which
            # closes itself): no plan waiting in the native object may be
            # applied.
            try:
                self._plans.close()
            except Exception:
                _logger.debug("_fail: error ignored", exc_info=True)
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
        if self._plans.waits:
            why = self._plans.start_waiting()
            if why is not None:
                self._fail(why)
            self._drain_coordinated_log()  # the line that says what runs, or why not
        self._open = True
        self._pipeline_done = False
        self._number = number
        self._timing.begin_step()
        self._t0 = time.perf_counter()
        if self._off_shape:
            return
        if self._plans.native is not None:
            # A waiting plan first, then the agent's; then a grid plan's
            # timing (its stop ramp, this pipeline's offset).
            self._plans.native.on_step_begin(
                number if number is not None else self._iteration)
        elif self._agent is not None:
            self._agent.on_step_begin()

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
        if self._plans.native is not None:
            self._plans.native.on_step_end()  # the agent's, then this iteration's report
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

    def _fell_back(self) -> bool:
        try:
            return self._agent is not None and self._agent.fallback_reason is not None
        except Exception:
            return False

    def phase_begin(self, kind: str) -> None:
        """Work between training iterations starts that is reported apart
        from them (`kind`: "evaluation", "checkpoint"): an open iteration
        ends first (without its line: the integration says it). A phase
        begun inside an open one is part of it."""
        if self._open and not self._timing.in_phase:
            self.iteration_end()
        self._timing.begin_phase(kind)

    def phase_end(self, outer: bool = False) -> Optional[PhaseRecord]:
        """Ends the phase phase_begin opened; its record (None for the end
        of a nested one, or with no phase open)."""
        record = self._timing.end_phase(self._last_ended, outer)
        if record is not None:
            self.phase_records.append(record)
            self._log.phase(record)
        return record

    def iteration_end(self) -> Optional[IterationRecord]:
        if not self._open:
            return None
        self._open = False
        elapsed = time.perf_counter() - self._t0
        measured = self._timing.stop_step()
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
            plan_version=(0 if self._off_shape or self._fell_back() else self._plans.version),
            clocks_applied=applied - self._last_applied,
            predicted_saving=self._plans.predicted_saving,
            rank=self._job_rank, gpus=max(1, self.topo.world_size))
        self._last_applied = applied
        self._last_ended = record.iteration
        self._trace.step_end(record.iteration)
        self._iteration += 1
        finished = self._timing.ended_step(record, tokens, elapsed, measured)
        self._drain_agent_log()
        if self._sweep is not None:
            self._sweep.say_progress(self._phase == "profile", self.failure is not None,
                                     self.SWEEP_PROGRESS_EVERY)
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
        record.approximate = self._timing.over_limit(energy, time_s, "an iteration") or approximate
        record.method = method
        self.records.append(record)
        self._log.iteration(record)
        if self.on_record is not None:
            try:
                self.on_record(record)
            except Exception:
                _logger.debug("on_record: error ignored", exc_info=True)
        return record

    # Iterations between two progress lines of a running profile sweep.
    SWEEP_PROGRESS_EVERY = 10

    # ---- coordination (at the iteration boundary) -----------------------------
    #
    # The training thread posts one row per iteration to the Link and takes
    # what the rounds decided; the rounds themselves (the side group's
    # collectives, rank 0's planning and its coordinator) run on the Link's
    # background thread (_rounds.py), so training never waits on another rank.

    def _sweep_left(self) -> int:
        """The fewest iterations this rank's sweep still needs (0: none runs)."""
        return self._sweep.left(self._phase == "profile") if self._sweep is not None else 0

    def _row(self) -> List[float]:
        """This rank's row of the round (protocol/round_row.hpp), as the
        numbers the side group gathers; rank 0 fills in the round's
        decisions (Rounds.step)."""
        return _core.RoundRow(iteration=self._iteration, pipeline_time_s=self._pipeline_time,
                              profile_shared=self._shared,
                              running_version=self._plans.version,
                              sweep_iterations_left=max(0, self._sweep_left())).to_floats()

    def _ready_to_share(self) -> bool:
        """This rank's part of the profile is complete (or it has none to give)."""
        if self._phase != "profile" or self.failure is not None or self._sweep is None:
            return True
        return self._sweep.done

    def _share(self) -> Dict[str, Any]:
        report = None
        if self._sweep is not None and self.failure is None:
            report = self._sweep.profiler.report().to_dict()
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
        try:
            self._plans.join(self._agent, job_id, self._gpu, self._control)
        except Exception as error:
            self._fail(f"cannot join the coordinator's job {job_id}: {error}")
            return
        self._set_hooks(self._plans.native)
        self._phase = "execute"
        self._drain_coordinated_log()

    def _drain_coordinated_log(self) -> None:
        refusal = self._plans.drain()
        if refusal and self.failure is None:
            self.failure = refusal  # said once already (drain)

    def _receive_plans(self, offered: Any) -> None:
        """Every rank: rank 0's newest plans, as the rounds delivered them:
        {"plans": {rank: the rank's plan as protocol JSON}, "baseline_energy_j"}."""
        mine = offered["plans"].get(self.topo.rank) if offered else None
        if mine is None:
            self._fail("the coordinator sent no plan for this rank")
            return
        self._plans.baseline_energy_j = offered.get("baseline_energy_j") or None
        if self.failure is not None:
            return
        self._plans.receive(mine)
        self._phase = "execute"

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

    def _say_unfinished_sweep(self) -> None:
        """At close: a sweep the job ended before it finished, said (by rank 0
        for the job's profile too)."""
        sweep = self._sweep
        if sweep is None:
            return
        profiling = self._phase == "profile"
        sweep.say_unfinished(profiling, self.failure is not None)
        if self.topo.rank != 0 or self.failure is not None or self._rounds.plan_started:
            return
        if self.options.mode in ("profile", "optimize"):
            sweep.say_job_unfinished(self._rounds.last_rows, self._iteration, profiling)

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
        self._timing.drain()
        self.phase_end(outer=True)
        self._trace.close()
        self._say_unfinished_sweep()
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
        try:
            self._rounds.close()
        except Exception:
            _logger.debug("close: error ignored", exc_info=True)
        try:
            self._drain_coordinated_log()
            self._plans.close()
        except Exception:
            _logger.debug("close: error ignored", exc_info=True)
        if self._agent is not None:
            try:
                self._agent.close()  # default clocks back, controller joined
            except Exception:
                _logger.debug("close: error ignored", exc_info=True)
            self._agent = None
        self._log.close()

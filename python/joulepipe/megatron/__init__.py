"""joulepipe for Megatron-LM / megatron-core, behind one option.

    import joulepipe.megatron as jpm
    jpm.enable("optimize")          # or "measure", "profile"
    ... the usual training loop (get_forward_backward_func() after enable) ...
    jpm.disable()

or, with an unmodified ``pretrain_gpt.py``::

    torchrun ... -m joulepipe.megatron.run --joulepipe optimize -- pretrain_gpt.py <megatron args>

What ``enable`` does: it wraps megatron-core's pipeline schedules
(``forward_backward_no_pipelining``, ``..._pipelining_without_interleaving``,
``..._pipelining_with_interleaving``: one call is one training iteration's
forwards and backwards) and its ``forward_step`` / ``backward_step``, which
the schedules look up as module globals at call time. It touches nothing
else but a torch optimizer-step hook (below), and ``disable()`` puts every
original back and removes the hook. The session (measurement,
profiler, plan) starts at the first training schedule call, when Megatron's
parallel state exists, so ``enable`` may be called before or after
``initialize_model_parallel``.

* A forward is identified by ``current_microbatch`` and, in the interleaved
  schedule, ``vp_stage`` (its model chunk); a backward by the output tensor
  the schedule hands it, which is the object the forward returned.
* An iteration's window runs from its schedule call to the first optimizer
  step after its backwards (torch's global optimizer-step hook: Megatron-LM's
  optimizers step a torch optimizer inside theirs). Evaluation passes
  (``forward_only=True``), checkpointing and teardown are in no window:
  no clock, no measurement, and the plan is not disturbed.
* Under Megatron-LM's ``train()`` (``megatron.training``), iterations carry
  its numbers (``args.curr_iteration + 1``, counting on after ``--load``),
  lines follow its ``--log-interval``, tokens/s its current batch (a
  batch-size rampup included), and its TensorBoard and W&B writers get
  joulepipe's own tags (``joulepipe/...``), never one it writes itself.
* An iteration that Megatron's rerun machinery repeats is simply one more
  schedule call; the plan restarts at its first instruction.
* The MoE ``combined_1f1b`` path calls neither hook: its iterations are
  measured, but run at default clocks (the agent sees an empty iteration and
  falls back, logged once).

Hooks written for megatron-core 0.16 to 0.19 (``*args, **kwargs``;
``backward_step`` lost ``model_type`` in 0.19, so the output tensor is taken
by name or position); tested with 0.16.1.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import logging
import re
import sys
from typing import Any, Callable, Dict, Iterator, Optional

from joulepipe._options import MODES, Options, Topology, check_max_slowdown, check_power_trace
from joulepipe._records import IterationRecord
from joulepipe._session import Session
from joulepipe.megatron.arguments import add_arguments, options_from_args  # noqa: F401

from joulepipe._log import default_log, logger as _logger  # errors ignored on purpose, at debug

__all__ = ["enable", "enable_from_args", "disable", "add_arguments", "session", "enabled",
           "last_iteration_summary", "iteration_end", "phase"]

_SCHEDULES = {
    "forward_backward_no_pipelining": "1f1b",
    "forward_backward_pipelining_without_interleaving": "1f1b",
    "forward_backward_pipelining_with_interleaving": "interleaved",
}


class _State:
    def __init__(self, options: Options, log: Callable[[str], None], writer: Any) -> None:
        self.options = options
        self.log = log
        self.writer = writer
        self.session: Optional[Session] = None
        self.session_failed = False
        self.originals: Dict[str, Any] = {}
        self.module: Any = None
        self.active = False  # inside a training schedule call
        self.forwards: Dict[int, tuple] = {}  # id(output tensor) -> (microbatch, chunk)
        self.next_microbatch: Dict[int, int] = {}
        self.last_record: Optional[IterationRecord] = None
        self.log_interval = 1  # Megatron's --log-interval, read at the first iteration
        self.auto_tokens = True  # tokens per iteration from each schedule call
        self.optimizer_hook: Any = None  # torch's global optimizer-step hook, removed at disable
        self.megatron_args: Any = None  # Megatron-LM's get_args(), read at the session's start
        self.data_parallel = 1
        self.says = True  # this rank writes iteration and phase lines (--joulepipe-log-rank)
        self.quiet = False  # last_iteration_summary(): the line is returned, not logged
        # Megatron-LM's functions measured as phases: name -> original.
        self.phase_originals: Dict[str, Any] = {}
        self.phase_module: Any = None


_state: Optional[_State] = None
_exit_hook = False


def enabled() -> bool:
    return _state is not None


def session() -> Optional[Session]:
    """The rank's session (None before the first training iteration)."""
    return _state.session if _state is not None else None


def enable(mode: str = "measure", *, plan: Optional[str] = None,
           coordinator: Optional[str] = None,
           coordinator_token: Optional[str] = None, max_slowdown: float = 1.0,
           control: str = "auto", daemon_socket: Optional[str] = None,
           profile: Optional[str] = None, profile_out: Optional[str] = None,
           profile_stride_mhz: int = 0, tokens_per_iteration: Optional[float] = None,
           log_path: Optional[str] = None, job_id: Optional[str] = None,
           log_rank: Optional[int] = None, power_trace: Optional[str] = None,
           power_trace_ms: float = 10.0, power_trace_s: float = 60.0,
           log: Optional[Callable[[str], None]] = None, writer: Any = None,
           stream: Optional[int] = None) -> None:
    """Turns joulepipe on for this process (every rank calls it).

    mode: "measure" (energy per iteration, clocks untouched), "profile"
    (measure, profile in situ, plan and log the predicted saving), "optimize"
    (apply ``plan``, or else profile (or use ``profile``), plan, apply a clock
    per forward/backward, switch plans on stragglers) or "off" (= disable()).
    plan: a plan file or `joulepipe plan --out` DIR; each rank applies its
    pipeline stage's plan from the first iteration (optimize only).
    coordinator: URL of ``joulepipe serve``; None runs the coordination
    policy on rank 0 over a side process group of the job (nothing else to
    run). max_slowdown: iteration time the plan may add (1.0: none).
    control: "auto" (the joulepiped socket if it exists, else NVML directly),
    "daemon" or "nvml". tokens_per_iteration: for tokens/s and J/token
    (default: each iteration's own batch, microbatches x micro-batch size x
    sequence length x data-parallel size from the schedule call, so a
    batch-size rampup is counted as it runs). log: one line per event and
    per iteration, every --log-interval iterations under Megatron-LM
    (default: print on stderr); an evaluation's and a checkpoint save's
    lines too (Megatron-LM's, or ``phase()``'s). log_rank: iteration and
    phase lines from that rank only (default: every rank's). Iterations
    are numbered as Megatron-LM numbers them when its training loop runs (a
    resume counts on). writer:
    a TensorBoard-like ``add_scalar`` writer (default: Megatron's, when it
    exists), given joulepipe's own tags (joulepipe/...), never one Megatron
    writes. power_trace: each rank's GPU power every power_trace_ms for
    power_trace_s from the first iteration, with its step ends, into this
    file ("{rank}" replaced); ``joulepipe power --join`` joins them.
    stream: the CUstream (an int) the training's kernels run on, where
    clocks change and profile rows are timed (default: PyTorch's current
    stream on a GPU; the CPU example passes the simulated GPU's).

    Idempotent: enabling again with the same options does nothing; with
    other options it restarts joulepipe with them.
    """
    global _state
    if mode == "off":
        disable()
        return
    options = Options(mode=mode, plan=plan, coordinator=coordinator,
                      coordinator_token=coordinator_token,
                      max_slowdown=max_slowdown, control=control, daemon_socket=daemon_socket,
                      profile=profile, profile_out=profile_out,
                      profile_stride_mhz=profile_stride_mhz,
                      tokens_per_iteration=tokens_per_iteration or 0, log_path=log_path,
                      job_id=job_id, log_rank=log_rank, power_trace=power_trace,
                      power_trace_ms=power_trace_ms, power_trace_s=power_trace_s,
                      stream=stream)
    if mode not in MODES:
        raise ValueError(f"joulepipe mode must be one of {', '.join(MODES)} (got {mode!r})")
    check_max_slowdown(max_slowdown)
    check_power_trace(options, None)  # the file itself once the rank is known
    if control not in ("auto", "nvml", "daemon"):
        raise ValueError(f"control must be auto, nvml or daemon (got {control!r})")
    if log_rank is not None and (not isinstance(log_rank, int) or log_rank < 0):
        raise ValueError(f"log_rank (--joulepipe-log-rank) must be a rank, 0 or more "
                         f"(got {log_rank!r})")
    if _state is not None:
        if _state.options == options:
            return
        disable()
    from megatron.core.pipeline_parallel import schedules

    state = _State(options, log or default_log(), writer)
    state.auto_tokens = not tokens_per_iteration
    state.module = schedules
    for name in _SCHEDULES:
        original = getattr(schedules, name)
        state.originals[name] = original
        setattr(schedules, name, _wrap_schedule(original, _SCHEDULES[name]))
    for name, wrap in (("forward_step", _wrap_forward), ("backward_step", _wrap_backward)):
        original = getattr(schedules, name)
        state.originals[name] = original
        setattr(schedules, name, wrap(original))
    # An iteration's window ends with its optimizer step (Megatron-LM's
    # optimizers step a torch optimizer inside theirs), so evaluation,
    # checkpointing and teardown after it are in no iteration's window.
    import torch.optim.optimizer as torch_optimizer

    state.optimizer_hook = torch_optimizer.register_optimizer_step_post_hook(
        _after_optimizer_step)
    _state = state
    global _exit_hook
    if not _exit_hook:
        # A job that ends without disable() (Megatron's --exit-interval,
        # sys.exit, an exception) still logs its last iteration and gives
        # its clocks back (signals: joulepipe/_guard.py).
        atexit.register(disable)
        _exit_hook = True


def enable_from_args(args: Any, **overrides: Any) -> None:
    """enable() from the flags add_arguments() added (an argparse Namespace,
    e.g. Megatron's ``get_args()``)."""
    kwargs = options_from_args(args)
    kwargs.update(overrides)
    enable(**kwargs)


def disable() -> None:
    """Restores megatron-core's functions and the GPU's default clocks."""
    global _state
    state, _state = _state, None
    if state is None:
        return
    for name, original in state.originals.items():
        setattr(state.module, name, original)
    for name, original in state.phase_originals.items():
        setattr(state.phase_module, name, original)
    if state.optimizer_hook is not None:
        state.optimizer_hook.remove()
    if state.session is not None:
        _end_iteration(state)  # the last iteration, if still open
        state.session.close()


def iteration_end() -> Optional[IterationRecord]:
    """Ends the current iteration's measurement now. An optimizer step
    after the iteration's forwards and backwards ends it on its own (else
    the next iteration's start does); call this to end it elsewhere.
    Returns the newest record finished (None when none is): its own, or,
    timed on the GPU's stream while the device still runs it, an earlier
    one's (its own comes once the device has run it)."""
    if _state is None or _state.session is None:
        return None
    return _end_iteration(_state)


def last_iteration_summary() -> Optional[str]:
    """Ends the current iteration (see iteration_end) and returns its line,
    e.g. "joulepipe: iteration 3 | 25.1 ms | 5.21 J/iter/GPU | ..."."""
    if _state is None or _state.session is None:
        return None
    _end_iteration(_state, say=False)
    return _state.last_record.summary() if _state.last_record is not None else None


def _end_iteration(state: _State, say: bool = True) -> Optional[IterationRecord]:
    """Ends the session's open iteration, if any; the records it finishes
    (_finished) become the last one, and (with `say`) their lines are
    logged. Returns the newest finished."""
    state.quiet = not say
    try:
        return state.session.iteration_end()
    finally:
        state.quiet = False


def _finished(state: _State, record: IterationRecord) -> None:
    """The session's on_record: an iteration's record is finished (at its
    end, or once the device has run it when timed on the stream)."""
    state.last_record = record
    # A line when Megatron writes its own (iteration % --log-interval);
    # the log file and TensorBoard get every iteration.
    if not state.quiet and record.iteration % state.log_interval == 0 and state.says:
        state.log(record.summary())


@contextlib.contextmanager
def phase(kind: str) -> Iterator[None]:
    """Measures the work inside apart from training iterations, as a phase
    of its own: ``with jpm.phase("evaluation"): ...``. An open iteration
    ends first (its optimizer has stepped); the phase gets one line
    ("joulepipe: evaluation after iteration 3 | ... ms | ... J/GPU | ... W/GPU"),
    a record in a .jsonl log (``"kind": "evaluation"``) and TensorBoard tags
    ``joulepipe/<kind>-energy-per-gpu-j`` and ``joulepipe/<kind>-time-s`` at
    the step of the iteration before it. Under Megatron-LM's training loop
    its evaluations and checkpoint saves are phases already. Clocks are
    the default ones throughout. Nothing happens before the first training
    iteration, or inside one. `kind`: lower-case letters, digits and '-'
    (it names tags)."""
    if not isinstance(kind, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", kind):
        raise ValueError(f"phase kind must be 1-32 lower-case letters, digits or '-', "
                         f"e.g. 'evaluation' (got {kind!r})")
    state = _state
    s = state.session if state is not None else None
    if s is None or state.active:
        yield
        return
    try:
        _end_iteration(state)
        s.phase_begin(kind)
    except Exception:
        _logger.debug("phase: error ignored", exc_info=True)
    try:
        yield
    finally:
        try:
            record = s.phase_end()
            if record is not None and state.says:
                state.log(record.summary())
        except Exception:
            _logger.debug("phase: error ignored", exc_info=True)


# Megatron-LM's functions (megatron.training.training) that run between
# training iterations, measured as phases. train() looks them up as module
# globals at call time, so wrapping them at the first iteration is enough.
_MEGATRON_LM_PHASES = {"evaluate_and_print_results": "evaluation",
                       "save_checkpoint_and_time": "checkpoint"}


def _wrap_megatron_lm_phases(state: _State) -> None:
    module = sys.modules.get("megatron.training.training")
    if module is None:  # megatron-core alone, or a loop of the user's own
        return
    for name, kind in _MEGATRON_LM_PHASES.items():
        original = getattr(module, name, None)
        if callable(original) and not hasattr(original, "__joulepipe_wrapped__"):
            state.phase_originals[name] = original
            setattr(module, name, _wrap_phase(original, kind))
    state.phase_module = module


def _wrap_phase(original: Callable, kind: str) -> Callable:
    @functools.wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        with phase(kind):
            return original(*args, **kwargs)

    run.__joulepipe_wrapped__ = original
    return run


# ---- the wrappers --------------------------------------------------------------


def _after_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """torch's hook after any optimizer's step: ends a training iteration
    whose forwards and backwards are done (the first step after them, when a
    job steps several optimizers)."""
    state = _state
    if state is None or state.active or state.session is None:
        return
    try:
        if state.session.pipeline_done:
            _end_iteration(state)
    except Exception:
        _logger.debug("_after_optimizer_step: error ignored", exc_info=True)


def _start_session(state: _State) -> Optional[Session]:
    """At the first training schedule call: Megatron's parallel state exists."""
    try:
        from joulepipe._exchange import LocalExchange, TorchExchange

        topology = _topology()
        exchange = (TorchExchange(state.options.coordination_timeout_s)
                    if topology.world_size > 1 and state.options.mode != "measure"
                    and not state.options.plan else LocalExchange())
        # Looked up once: the training path reads them every iteration.
        state.megatron_args = args = _megatron_args()
        options = state.options
        train_iters = getattr(args, "train_iters", None)
        if isinstance(train_iters, int) and train_iters > 0:
            # Megatron-LM numbers its iterations 1..train_iters: a grid
            # plan's stop ramp ends at the last. (A copy: enable() compares
            # the options it was given.)
            options = dataclasses.replace(options, last_iteration=train_iters)
        state.data_parallel = _data_parallel_size()
        interval = getattr(args, "log_interval", None)
        if isinstance(interval, int) and interval > 0:
            state.log_interval = interval
        writer = state.writer if state.writer is not None else _megatron_writer()
        chosen = state.options.log_rank
        if chosen is not None and chosen >= topology.world_size:
            if topology.rank == 0:
                state.log(f"joulepipe: --joulepipe-log-rank {chosen} is not a rank of this job "
                          f"({topology.world_size} ranks); rank 0 writes the lines instead")
            chosen = 0
        state.says = chosen is None or topology.rank == chosen
        session = Session(options, topology, exchange, state.log, writer)
        session.on_record = functools.partial(_finished, state)
        _wrap_megatron_lm_phases(state)
        return session
    except Exception as error:
        state.session_failed = True
        state.log(f"joulepipe: could not start ({type(error).__name__}: {error}); "
                  "training goes on without it")
        return None


def _wrap_schedule(original: Callable, schedule: str) -> Callable:
    @functools.wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        state = _state
        if state is None or kwargs.get("forward_only", False) or state.active:
            return original(*args, **kwargs)
        model = kwargs.get("model")
        chunks = len(model) if isinstance(model, (list, tuple)) else 1
        microbatches = int(kwargs.get("num_microbatches", 1))
        if state.session is None and not state.session_failed:
            state.session = _start_session(state)
            final = _final_microbatches(state)
            if state.session is not None and final:
                # A batch-size rampup: the job's shape is its final batch's;
                # iterations before it run at default clocks (set_shape).
                state.session.expect_shape(schedule, final, chunks)
        s = state.session
        if s is None:
            return original(*args, **kwargs)
        s.set_shape(schedule, microbatches, chunks)
        _end_iteration(state)  # the previous iteration, when the loop did not end it
        if state.auto_tokens:
            # This iteration's batch: it grows through a batch-size rampup.
            s.options.tokens_per_iteration = _tokens(kwargs, microbatches, state.data_parallel)
        s.iteration_begin(_megatron_iteration(state))
        state.forwards.clear()
        state.next_microbatch.clear()
        state.active = True
        try:
            return original(*args, **kwargs)
        finally:
            state.active = False
            s.pipeline_end()

    run.__joulepipe_wrapped__ = original
    return run


def _wrap_forward(original: Callable) -> Callable:
    @functools.wraps(original)
    def forward_step(*args: Any, **kwargs: Any) -> Any:
        state = _state
        if state is None or not state.active:
            return original(*args, **kwargs)
        chunk = kwargs.get("vp_stage") or 0
        microbatch = kwargs.get("current_microbatch")
        if microbatch is None:  # not passed: count this chunk's forwards
            microbatch = state.next_microbatch.get(chunk, 0)
        state.next_microbatch[chunk] = microbatch + 1
        s = state.session
        s.forward_begin(microbatch, chunk)
        result = original(*args, **kwargs)
        s.forward_end(microbatch, chunk)
        # forward_step returns (output_tensor, num_tokens); the schedule hands
        # that output_tensor object to the microbatch's backward_step.
        state.forwards[id(result[0])] = (microbatch, chunk)
        return result

    forward_step.__joulepipe_wrapped__ = original
    return forward_step


def _wrap_backward(original: Callable) -> Callable:
    @functools.wraps(original)
    def backward_step(*args: Any, **kwargs: Any) -> Any:
        state = _state
        if state is None or not state.active:
            return original(*args, **kwargs)
        output_tensor = kwargs["output_tensor"] if "output_tensor" in kwargs else (
            args[1] if len(args) > 1 else None)
        key = state.forwards.pop(id(output_tensor), None)
        if key is None and state.forwards:  # not the forward's object: the oldest forward
            key = state.forwards.pop(next(iter(state.forwards)))
        if key is None:
            return original(*args, **kwargs)
        s = state.session
        s.backward_begin(*key)
        result = original(*args, **kwargs)
        s.backward_end(*key)
        return result

    backward_step.__joulepipe_wrapped__ = original
    return backward_step


def _topology() -> Topology:
    import os

    topology = Topology(local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            topology.rank = dist.get_rank()
            topology.world_size = dist.get_world_size()
    except Exception:
        _logger.debug("_topology: error ignored", exc_info=True)
    try:
        from megatron.core import parallel_state as ps

        if ps.model_parallel_is_initialized():
            topology.pp = ps.get_pipeline_model_parallel_world_size()
            topology.pp_rank = ps.get_pipeline_model_parallel_rank()
            topology.tp = ps.get_tensor_model_parallel_world_size()
            topology.tp_rank = ps.get_tensor_model_parallel_rank()
            topology.dp = topology.world_size // (topology.pp * topology.tp)
            topology.dp_rank = ps.get_data_parallel_rank(with_context_parallel=True)
    except Exception:
        _logger.debug("_topology: error ignored", exc_info=True)
    return topology


def _megatron_args() -> Any:
    """Megatron-LM's parsed arguments, or None (megatron.training absent, as
    in the megatron-core wheel, or not initialised)."""
    try:
        from megatron.training import get_args

        return get_args()
    except Exception:
        return None


def _data_parallel_size() -> int:
    """Data-parallel ranks without context parallelism (its ranks share a
    sequence); 1 before Megatron's parallel state exists."""
    try:
        from megatron.core import parallel_state as ps

        return ps.get_data_parallel_world_size() if ps.model_parallel_is_initialized() else 1
    except Exception:
        return 1


def _megatron_iteration(state: _State) -> Optional[int]:
    """The iteration about to run, numbered as Megatron-LM logs it (its
    ``iteration N/M`` line and TensorBoard step: args.curr_iteration + 1,
    counting on from a checkpoint after --load); None outside its loop."""
    current = getattr(state.megatron_args, "curr_iteration", None)
    return current + 1 if isinstance(current, int) else None


def _final_microbatches(state: _State) -> Optional[int]:
    """Under Megatron-LM's --rampup-batch-size, the microbatches of the final
    global batch (global batch / (micro-batch size x data-parallel size));
    None without a rampup or outside Megatron-LM's loop."""
    args = state.megatron_args
    if not getattr(args, "rampup_batch_size", None):
        return None
    try:
        final = int(args.global_batch_size) // (int(args.micro_batch_size) * state.data_parallel)
        return final if final > 0 else None
    except Exception:
        return None


def _tokens(kwargs: Dict[str, Any], microbatches: int, data_parallel: int) -> float:
    """Tokens this iteration trains on, from the schedule call itself:
    microbatches x micro-batch size x sequence length x data-parallel size.
    0 if the call does not say."""
    try:
        return float(microbatches * int(kwargs["micro_batch_size"]) * int(kwargs["seq_length"])
                     * data_parallel)
    except (KeyError, TypeError, ValueError):
        return 0.0


class _Writers:
    """Megatron-LM's TensorBoard writer and its Weights & Biases one (the
    wandb module, ``log(dict, step)``) behind one ``add_scalar``. joulepipe
    writes an iteration's scalars after Megatron has logged that iteration,
    so the steps it gives W&B never go back."""

    def __init__(self, tensorboard: Any, wandb: Any) -> None:
        self.tensorboard = tensorboard
        self.wandb = wandb

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        if self.tensorboard is not None:
            self.tensorboard.add_scalar(tag, value, step)
        if self.wandb is not None:
            self.wandb.log({tag: value}, step)


def _megatron_writer() -> Any:
    try:
        from megatron.training import global_vars
    except Exception:
        return None
    writers = []
    for name in ("get_tensorboard_writer", "get_wandb_writer"):
        try:
            writers.append(getattr(global_vars, name)())
        except Exception:
            writers.append(None)
    return _Writers(*writers) if any(w is not None for w in writers) else None

"""joulepipe._core: the C++ library's task-level calls (src/python).

Conventions:
* Errors: InputError (a ValueError) for bad input, with ``.field`` naming
  the library field (e.g. ``"Spec::stages"``); a missing file is
  FileNotFoundError; GpuError (a RuntimeError) when NVML cannot be used;
  JobStateError for a CoordJob call its phase does not allow.
* Long calls (plan_pipeline, simulate) release the GIL, call ``progress(phase,
  fraction)`` on the caller's thread, and stop on Ctrl-C with
  KeyboardInterrupt (nothing is left behind).
* A ``profile`` argument is a Profile or the path of a profile CSV.
* A stage plan is a list of ``(Kind, microbatch, chunk, mhz)`` tuples in
  execution order; an instruction after which the plan lowers the wait
  (``plan --wait-model``) is ``(Kind, microbatch, chunk, mhz, wait_mhz,
  wait_restore_s)``: the agent requests wait_mhz at its end and the next
  instruction's clock wait_restore_s later.
"""

from __future__ import annotations

import enum
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

version: str

PathLike = Union[str, "os.PathLike[str]"]
ProfileArg = Union["Profile", PathLike]
Progress = Optional[Callable[[str, float], None]]
# (kind, microbatch, chunk, mhz[, wait_mhz, wait_restore_s[, knobs]])
StagePlan = List[Union[Tuple["Kind", int, int, int], Tuple["Kind", int, int, int, int, float],
                       Tuple["Kind", int, int, int, int, float, str]]]

class InputError(ValueError):
    """Bad input. str(e) is the library's message; e.field the field it is about
    ('' when it names a file position instead)."""

    field: str

class GpuError(RuntimeError):
    """NVML cannot be used, an NVML call failed, a MIG GPU, or a value the GPU
    does not accept; str(e) says which and how to fix it."""

class JobStateError(RuntimeError):
    """A CoordJob call its phase does not allow."""

class Cancelled(RuntimeError):
    """A long task was cancelled by the library's own cancel flag."""

class Kind(enum.Enum):
    """An instruction's kind: one forward or one backward of one microbatch."""

    FORWARD = 0
    BACKWARD = 1

# ---- profiles -------------------------------------------------------------------------

class ProfileMetadata:
    """The profile CSV's '# key: value' lines; every field may be empty / None."""

    gpu: str
    p_block_w: Optional[float]
    source: str  # "measured" | "simulated" | "imported" | ""
    date: str  # ISO 8601 UTC
    joulepipe_version: str
    method: str  # how a simulated profile was made (model, job, framework, validation)
    def __init__(self) -> None: ...

class Profile:
    """Per stage and instruction kind, time (s) and energy (J) of one instruction
    at each SM clock, with metadata (docs/formats.md, "Profile CSV")."""

    metadata: ProfileMetadata
    @property
    def stages(self) -> int: ...
    @staticmethod
    def read(path: PathLike) -> Profile: ...
    @staticmethod
    def parse(text: str, source: str = "profile") -> Profile: ...
    def to_csv(self) -> str: ...
    def write(self, path: PathLike, *, overwrite: bool = False) -> None:
        """Atomically; an existing file is FileExistsError unless overwrite."""
    def points(self, stage: int, kind: Kind) -> List[Tuple[int, float, float]]:
        """(mhz, time_s, energy_j), highest clock first."""
    def validate(self, stages: int, source: str = "profile") -> None: ...

def read_profile(path: PathLike) -> Profile: ...
def catalog_gpu(name: str) -> Optional[Dict[str, Any]]:
    """The catalogue's {"id", "name", "p_block_w"} for a GPU named by its NVML
    name, id or an alias (case-insensitive); None when it is not known."""
def simulate_profile(model: str, gpu: str, *, tp: int, pp: int, dp: int = 1,
                     microbatch_size: int = 1, seq_length: int = 0, recompute: str = "none",
                     layer_split: Union[str, Sequence[int], None] = "even",
                     power_limit_w: float = 0.0, min_mhz: int = 0,
                     framework: str = "megatron", precision: str = "bf16",
                     gpus_per_node: int = 0, node_network_gbps: float = 0.0,
                     rank_order: str = "tp-first") -> Profile:
    """The workload model's profile (`joulepipe profile --simulate`), stamped
    source "simulated" with the GPU's name and P_block. framework is
    "megatron" or "hf-eager", precision "bf16" or "tf32" (the CLI's
    --framework and --precision). gpus_per_node, node_network_gbps (GB/s per
    node) and rank_order ("tp-first" as Megatron-LM, "pp-first" as Merak) say
    where the ranks sit: TP all-reduces that leave a node share its network
    (the CLI's --gpus-per-node, --node-network-gbps, --rank-order)."""

def estimate_memory(model: str, gpu: str, *, tp: int, pp: int, dp: int = 1,
                    microbatch_size: int = 1, seq_length: int = 0, recompute: str = "none",
                    layer_split: Union[str, Sequence[int], None] = "even",
                    framework: str = "megatron", precision: str = "bf16",
                    schedule: str = "1f1b", microbatches: int = 0, chunks: int = 1,
                    distributed_optimizer: bool = True,
                    sequence_parallel: bool = True) -> Dict[str, Any]:
    """What one GPU of each stage holds at its peak (model state and the
    activations of the microbatches in flight; microbatches 0 = pp), in GiB:
    {"figures", "gpu_gib", "peak_stage", "peak_gib", "headroom_gib",
    "stages": [{"stage", "parameters", "model_state_gib", "activation_gib",
    "in_flight", "total_gib"}]}. An estimate (docs/workload-model.md,
    "Memory"): leave a margin for the CUDA context, NCCL and fragmentation."""

# ---- planning -------------------------------------------------------------------------

class Frontier:
    """The iteration time-energy frontier, ascending time. numpy.asarray(f) is a
    read-only (n, 2) view (time_s, energy_j) without a copy."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Tuple[float, float]: ...
    def tolist(self) -> List[Tuple[float, float]]: ...

class PipelinePlan:
    """A solved plan: the frontier, the chosen point (least energy within the
    deadline) and one clock per instruction."""

    schedule: str
    stages: int
    microbatches: int
    chunks: int
    instructions: int
    baseline_time_s: float  # every instruction at its highest clock
    baseline_energy_j: float
    time_s: float  # the chosen point
    energy_j: float
    saving: float  # 1 - energy_j / baseline_energy_j
    bound_energy_j: float  # no plan at the baseline time uses less
    deadline_s: float  # (1 + slowdown) x baseline_time_s
    slowdown: float
    goal: str          # "within-deadline", "least-energy", "energy-budget", "power-budget"
    energy_scope: str  # "GPU energy" or "GPU + host energy (host W per GPU)"
    counted_energy_j: float  # the chosen plan's energy as the goal counts it
    chosen_index: int
    wait_model: str  # "uncalibrated (...)" or "calibrated (FILE: ...)"
    energy_with_lowered_waits_j: float  # energy_j with the wait model's lowered waits
    lowered_waits: int  # waits the chosen plan lowers (0 without a wait model)
    lowered_wait_s: float  # seconds at the wait clock, all stages
    p_block_w: float
    p_block_source: str  # "request" | "profile"
    solve_seconds: float
    notes: List[str]
    frontier: Frontier
    def stage_plan(self, stage: int) -> StagePlan: ...
    def head_wait(self, stage: int) -> Optional[Tuple[int, float]]: ...
    def to_json(self) -> str:
        """The chosen plan file (`joulepipe plan`'s chosen.json, byte for byte)."""
    def point_json(self, index: int) -> str: ...

class Plan:
    """A plan file."""

    schedule: str
    stages: int
    microbatches: int
    chunks: int
    power_limits_w: List[float]
    pipeline_offset_s: float
    stop_ramp_s: float
    predicted_time_s: Optional[float]
    predicted_energy_j: Optional[float]
    @staticmethod
    def read(path: PathLike) -> Plan:
        """A plan file, or DIR/chosen.json for a `joulepipe plan --out` DIR."""
    @staticmethod
    def parse(text: str, source: str = "plan") -> Plan: ...
    def stage_plan(self, stage: int) -> StagePlan: ...
    def head_wait(self, stage: int) -> Optional[Tuple[int, float]]:
        """The lowered wait before the stage's first instruction (a plan made
        with a wait model): (wait_mhz, restore_s after the step begins), or
        None. Pass it to Agent.set_plan(head_wait=...)."""
    def to_json(self) -> str: ...

def plan_pipeline(profile: ProfileArg, *, stages: int, microbatches: int,
                  schedule: str = "1f1b", chunks: int = 1, p_block_w: Optional[float] = None,
                  slowdown: float = 0.0, resolution_s: float = 1e-3, progress: Progress = None,
                  profile_name: Optional[str] = None, least_energy: bool = False,
                  energy_budget_j: Optional[float] = None,
                  power_budget_w: Optional[float] = None,
                  host_power_w: float = 0.0,
                  wait_model: Optional[PathLike] = None) -> PipelinePlan:
    """solver::PlanPipeline, as `joulepipe plan`. p_block_w None: the profile's
    metadata. The operating point (one goal at most): slowdown, the iteration
    time the plan may add, a fraction (0: same time); least_energy; the
    fastest plan within energy_budget_j per iteration or power_budget_w on
    average (the pipeline's GPUs, one per stage). host_power_w: W per GPU of
    host power counted with the GPU energy for as long as the iteration
    lasts (least energy for the whole node); 0 counts GPU energy only.
    wait_model: the file `joulepipe calibrate-wait` writes (`--wait-model`):
    the frontier re-priced with lowered waits, the choice made again, and
    the chosen plan's stage_plan() entries lowering a wait are 6-tuples."""

def plan_power_limits(profile: ProfileArg, *, stages: int, microbatches: int,
                      schedule: str = "1f1b", chunks: int = 1,
                      p_block_w: Optional[float] = None, slowdown: float = 0.0,
                      least_energy: bool = False, min_power_limit_w: Optional[float] = None,
                      max_power_limit_w: Optional[float] = None) -> Dict[str, Any]:
    """solver::SolveLimitFrontier, as `joulepipe plan --lever power-limit`: one
    power limit per stage instead of a clock per instruction. The least
    energy within (1 + slowdown) x the default-limit time, or at any speed
    (least_energy). min/max_power_limit_w: the GPUs' accepted range (None:
    no bound but the profile's). Returns baseline_time_s, baseline_energy_j,
    deadline_s, p_block_w, time_s, energy_j, saving (a fraction),
    power_limits_w (per stage, 0 = default), plan (a Plan with them),
    frontier [(time_s, energy_j, power_limits_w)], evaluations."""

def evaluate_plan(profile: ProfileArg, plan_json: str, *, p_block_w: Optional[float] = None,
                  plan_name: str = "plan") -> Dict[str, Any]:
    """schedule::EvaluatePlan, as `joulepipe evaluate`: time_s, energy_j,
    busy_energy_j, blocking_energy_j, p_block_w, predicted_*, notes, shape."""

def tune(model: str, gpu: str, *, gpus: int, tp: int = 8, pp: int = 8,
         microbatch_size: int = 1, schedule: str = "1f1b", chunks: int = 1,
         global_batch: int = 1536, seq_length: int = 0, framework: str = "megatron",
         precision: str = "bf16", recompute: str = "none", keep: str = "",
         gpus_per_node: int = 8, max_chunks: int = 4, max_microbatch_size: int = 8,
         memory_margin: float = 0.10, slowdown: float = 0.0, envelope_span: float = 0.10,
         grid_points: int = 60, max_instructions: int = 4096, dp_gbps: float = 25.0,
         p2p_gbps: float = 25.0, progress: Progress = None) -> Dict[str, Any]:
    """tune::Tune, as `joulepipe tune --json`: which configuration of the job
    (same GPUs and global batch; today's is tp x pp x gpus/(tp pp), its
    microbatch size and schedule), with which clocks, uses the least energy
    at (1 + slowdown) x today's time. {"figures", "current": {config...,
    "full_clocks", "clocks_only"}, "chosen": {config..., "full_clocks",
    "with_plan", "peak_memory_gib", "headroom_gib", "plan": Plan},
    "saving_pct": {"total", "clocks", "configuration"}, "target_time_s",
    "envelope": [{"time_s", "energy_j", "saving_pct", "config"}],
    "candidates": [{config..., "status", ...}], "solved",
    "too_large_gain_bound_pct", "cancelled", "seconds"}. Every figure is
    simulated."""

def simulate(profile: ProfileArg, *, stages: int, microbatches: int, schedule: str = "1f1b",
             chunks: int = 1, p_block_w: Optional[float] = None, pipelines: int = 1,
             gpus_per_stage: int = 1, iterations: int = 1, p2p_latency_s: float = 0.0,
             allreduce_s: float = 0.0, straggler_pipeline: int = -1,
             straggler_slowdown: float = 1.0, straggler_from_iteration: int = 0,
             straggler_for_iterations: int = 0, straggler_period: int = 0,
             clock_variability: float = 0.0, stall_probability: float = 0.0,
             stall_s: float = 0.0, seed: int = 1, detection: str = "oracle",
             detection_lag: int = 0, resolution_s: float = 5e-3,
             wait_model: Optional[PathLike] = None,
             progress: Progress = None, checkpoint_every: int = 0,
             checkpoint_s: float = 0.0) -> Dict[str, Any]:
    """sim::SimulateJob, as `joulepipe simulate --json`: baseline and joulepipe
    totals, saving_pct, the planned points, notes. wait_model: the file
    `joulepipe calibrate-wait` writes (`--wait-model`); the joulepipe policy
    then lowers its plans' waits (joulepipe["lowered_wait_s"], GPU-seconds
    over all iterations); "wait_model" says whether it is calibrated."""

# ---- GPUs and measurement ----------------------------------------------------------------

def gpus() -> List[Dict[str, Any]]:
    """The visible GPUs: index, nvml_index, name, uuid, architecture,
    mig_enabled, supported_sm_mhz, default_sm_mhz, has_energy_counter."""

MAX_PLAN_SLOWDOWN: float
"""The planner's largest slowdown, a fraction of the all-max-clock time."""

def sm_clock_mhz(nvml_index: int) -> int:
    """The SM clock the GPU runs now (MHz), as NVML reports it: under a
    power or thermal cap, lower than the clock locked. Raises GpuError."""

class Measurement:
    """One measured window."""

    name: str
    duration_s: float
    gpu_energy_j: float
    total_energy_j: float
    approximate: bool  # some energy was power x time
    gpus: List[Tuple[int, float]]
    gpu_sources: List[str]  # "counter" | "power samples" per GPU
    cpu_energy_j: Optional[float]
    dram_energy_j: Optional[float]
    methodology: str

def measure_command(command: Sequence[str], *, gpus: Optional[Sequence[int]] = None,
                    cpu: bool = False, interval_ms: float = 100.0) -> Dict[str, Any]:
    """Runs ``command`` inside one measurement window, as ``joulepipe measure`` does (the
    same library call): its own process group, SIGINT/SIGTERM/SIGHUP/... forwarded to it,
    its exit code kept (128 + N if signal N killed it, 127 if it cannot run). Returns
    ``started``, ``not_run``, ``exit_code``, ``exit_note``, ``measurement`` (a Measurement
    named "command"), ``measure_error``, ``scope`` and ``methodology``. Raises InputError
    for an empty command; NvmlUnavailable-style errors as Monitor does."""

class Monitor:
    """Named energy-measurement windows over GPUs (and CPU/DRAM with cpu=True)."""

    gpu_indices: List[int]
    methodology: str
    scope: str
    def __init__(self, gpus: Optional[Sequence[int]] = None, cpu: bool = False,
                 counter_period_s: float = 0.1) -> None: ...
    def begin(self, name: str) -> None: ...
    def end(self, name: str) -> Measurement: ...
    def is_open(self, name: str) -> bool: ...

class StepLogger:
    """Per-step time, energy, power, tokens/s and J/token over a Monitor; a CSV or
    JSON-lines file when path is given."""

    def __init__(self, monitor: Monitor, path: str = "", format: str = "csv",
                 tokens_per_step: float = 0.0) -> None: ...
    def begin_step(self) -> None: ...
    def end_step(self, tokens: float = -1.0) -> Dict[str, Any]: ...
    def summary(self) -> Dict[str, Any]: ...
    def format_summary(self) -> str: ...

class PowerTrace:
    """One GPU's power every interval_s for duration_s from construction, on a
    thread of its own, with the training's step ends; join a job's ranks'
    traces with ``joulepipe power --join``."""

    done: bool
    def __init__(self, nvml_index: int, *, interval_s: float = 0.01,
                 duration_s: float = 60.0) -> None: ...
    def mark_step_end(self, iteration: int) -> None: ...
    def write(self, path: str, rank: int, gpu: str = "") -> Dict[str, Any]:
        """Stops recording and writes the trace as JSON (atomically): samples,
        read_errors, step_ends, seconds."""

def join_power_traces(paths: Sequence[PathLike], *,
                      align_on_steps: bool = True) -> Dict[str, Any]:
    """`joulepipe power --join` as a call: dt_s, start_unix_s, total_w, ranks,
    offset_s, common_steps, rank_w and grid (peak_w, trough_w, mean_w,
    swing_w, ramp_w_per_s, band_rms_w, energy_j)."""

# ---- the runtime -----------------------------------------------------------------------

class ProfileReport:
    """What an in-situ profiler measured (rows, P_block, quality figures)."""

    p_block_w: float
    p_block_samples: int
    iterations: int
    max_confidence: float
    max_time_spread: float
    # Requests that ran at another clock (a throttled GPU), in words.
    notes: List[str]
    def to_dict(self) -> Dict[str, Any]: ...
    @staticmethod
    def from_dict(d: Dict[str, Any]) -> ProfileReport: ...
    def to_csv(self) -> str: ...

class InSituProfiler:
    """Sweeps SM clocks over the first iterations (docs/profiling.md); give it
    to Agent.set_profiler."""

    done: bool
    iterations: int
    def __init__(self, stage: int, clocks: Sequence[int], samples_per_clock: int = 0,
                 warmup_iterations: int = 1, stop_after_rises: int = 3, gpu: str = "") -> None: ...
    def report(self) -> ProfileReport: ...

def candidate_clocks(supported: Sequence[int], floor_fraction: float = 0.6,
                     stride_mhz: int = 0, floor_mhz: int = 0) -> List[int]: ...
def merge_reports(reports: Sequence[ProfileReport]) -> ProfileReport: ...
def unmeasured_p_block(merged: ProfileReport, gpu: str) -> Optional[Tuple[float, str]]: ...

ROUND_ROW_FLOATS: int

class RoundRow:
    """One rank's row of a coordination round (protocol/round_row.hpp)."""

    iteration: int
    pipeline_time_s: float
    profile_shared: bool
    running_version: int
    announced_version: int
    planning_failed: bool
    sweep_iterations_left: int
    def __init__(self, *, iteration: int = 0, pipeline_time_s: float = 0.0,
                 profile_shared: bool = False, running_version: int = 0,
                 announced_version: int = 0, planning_failed: bool = False,
                 sweep_iterations_left: int = 0) -> None: ...
    def to_floats(self) -> List[float]: ...
    @staticmethod
    def from_floats(floats: Sequence[float]) -> "RoundRow": ...

class StepMeter:
    """A step's time and energy where the GPU is (runtime::DeviceMeter):
    mark() records a CUDA event on the stream at a step's begin and end;
    take() returns the steps the device finished. Never waits for the GPU."""

    dropped: int
    def __init__(self, stream: int, nvml_index: int, poll_period_s: float = 0.001) -> None: ...
    def mark(self, begin: bool, tag: int) -> bool: ...
    # [(tag, seconds, joules, counter)]: counter True for the energy
    # counter's delta, else power samples taken while the step ran.
    def take(self) -> List[Tuple[int, float, float, bool]]: ...
    def caught_up(self, max_wait_s: float) -> bool: ...

class Agent:
    """The per-rank runtime: applies each instruction's planned clock from a
    controller thread. The hooks never raise and cost one native call."""

    mode: str  # "off" | "execute" | "profile" | "fallback"
    fallback_reason: Optional[str]
    # The knob setting the plan gives the running (or next) instruction, ""
    # if none (plans from profiles with knob columns); the training code
    # applies it.
    planned_knobs: str
    closed: bool
    log_dropped: int
    def __init__(self, nvml_index: int = 0, control: str = "nvml",
                 daemon_socket: str = "/run/joulepiped.sock",
                 idle_clock_mhz: Optional[int] = None) -> None: ...
    def set_plan(self, plan: StagePlan, power_limit_w: Optional[float] = None,
                 head_wait: Optional[Tuple[int, float]] = None) -> None:
        """Execute mode. power_limit_w: a power-limit plan's limit for this
        GPU (W, 0 = default): the limit is set once and no clock is locked;
        the plan's clocks are only what the limit is predicted to give.
        head_wait: Plan.head_wait(stage): on_step_begin locks wait_mhz and
        restores the first instruction's clock restore_s later."""
    def set_profiler(self, profiler: Optional[InSituProfiler]) -> None: ...
    def disable(self) -> None: ...
    def on_step_begin(self) -> None: ...
    def on_step_end(self) -> None: ...
    def on_instruction_begin(self, kind: Kind, microbatch: int, chunk: int = 0) -> None: ...
    def on_instruction_end(self, kind: Kind, microbatch: int, chunk: int = 0) -> None: ...
    def stats(self) -> Dict[str, int]: ...
    def wait_idle(self, timeout_s: float = 5.0) -> bool: ...
    def take_log(self) -> List[str]: ...
    def close(self) -> None:
        """Default clocks back, controller joined. Idempotent."""
    def __enter__(self) -> Agent: ...
    def __exit__(self, *exc: Any) -> bool: ...

class CoordinatedPlan:
    """An Agent run on the plans this rank is handed: by a coordinator
    (`joulepipe serve`, the constructor), by the job's own ranks
    (in_process, offer()) or from a plan file (from_plan). It owns versions,
    the switch at a step boundary, the reorder into the loop's order and
    refusing a plan of another shape (runtime/coordinated_plan.hpp). Its
    hooks are the only ones the loop calls (they drive the agent)."""

    log_dropped: int
    # [("forward" | "backward", microbatch, chunk)] of the first step; None before.
    loop_order: Optional[List[Tuple[str, int, int]]]
    def __init__(self, agent: Agent, url: str, job_id: str, rank: int,
                 token: Optional[str] = None, registration: Optional[Dict[str, Any]] = None,
                 start_wait_s: float = 60.0, start_timeout_s: float = 90.0,
                 meter_nvml_index: Optional[int] = None, through: str = "") -> None: ...
    @staticmethod
    def in_process(agent: Agent, rank: int, through: str = "") -> CoordinatedPlan: ...
    @staticmethod
    def from_plan(agent: Agent, plan: Plan, name: str, rank: int, stage: int, stages: int = 0,
                  through: str = "") -> CoordinatedPlan: ...
    def offer(self, rank_plan_json: str) -> bool:
        """in_process: this rank's plan as the wire's JSON; applied at the next step boundary."""
    def start(self) -> bool:
        """Bounded wait for the first plan; False: default clocks, training goes on."""
    def on_step_begin(self) -> None: ...
    def on_instruction_begin(self, kind: Kind, microbatch: int, chunk: int = 0) -> None: ...
    def on_instruction_end(self, kind: Kind, microbatch: int, chunk: int = 0) -> None: ...
    def on_step_end(self, time_s: Optional[float] = None,
                    energy_j: Optional[float] = None) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def take_log(self) -> List[str]: ...
    def close(self) -> None: ...
    def __enter__(self) -> CoordinatedPlan: ...
    def __exit__(self, *exc: Any) -> bool: ...

class CoordinatorClient:
    """The job's side of `joulepipe serve` (runtime::CoordinatorClient: timeouts,
    retries with backoff): register the job, upload its profile. Raises
    RuntimeError with the client's message when unreachable or refused."""

    def __init__(self, url: str, token: Optional[str] = None, connect_timeout_s: float = 5.0,
                 request_timeout_s: float = 30.0, max_attempts: int = 5) -> None: ...
    def register_job(self, job_id: str, *, pp: int, dp: int, tp: int, world_size: int,
                     schedule: str, microbatches: int, chunks: int = 1,
                     p_block_w: Optional[float] = None, slowdown: Optional[float] = None,
                     gpu: Optional[str] = None) -> str:
        """POST /jobs; the job's id (the service assigns one for "")."""
    def upload_profile(self, job_id: str, csv: str) -> int:
        """PUT /jobs/{job_id}/profile; the rows the service read."""

class CoordJob:
    """The coordination policy of one job (coord::Job), without I/O."""

    ready_to_plan: bool
    phase: str
    failure: str
    plan_version: int
    world_size: int
    registered_ranks: int
    baseline_time_s: float
    completed_iterations: int
    def __init__(self, job_id: str, dp: int, pp: int, tp: int, schedule: str,
                 microbatches: int, chunks: int = 1, p_block_w: Optional[float] = None, *,
                 resolution_s: float = 5e-3, gpu: str = "", max_slowdown: float = 1.0) -> None: ...
    def register_rank(self, rank: int, dp_rank: int, pp_rank: int, tp_rank: int,
                      available_mhz: Sequence[int]) -> bool: ...
    def set_profile(self, csv: str) -> None: ...
    baseline_energy_j: float
    def plan(self) -> None: ...
    def start_planning(self) -> None:
        """Plans on the job's own native thread; returns at once (once)."""
    def take_notes(self) -> List[str]: ...
    def offer(self) -> Dict[str, Any]:
        """{"plans": {rank: the rank's plan as the wire's JSON}, "baseline_energy_j": J}."""
    def report_round(self, iteration: int, times_s: Sequence[float], now: float) -> int: ...
    def close(self) -> None:
        """Cancels a solve in progress, joins the planner thread. Idempotent."""
    def plan_for(self, rank: int) -> Optional[Dict[str, Any]]: ...
    def plan_json_for(self, rank: int) -> Optional[str]: ...
    def report_iteration(self, rank: int, iteration: int, time_s: float,
                         energy_j: Optional[float] = None, now: Optional[float] = None) -> int: ...
    def switches(self) -> List[Dict[str, Any]]: ...
    def status_json(self) -> str: ...

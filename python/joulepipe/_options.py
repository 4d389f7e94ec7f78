"""What a session is asked to do (Options) and where its rank sits in the job
(Topology), with the checks both integrations run on them before training:
each raises ValueError naming the option and the fix."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from joulepipe import _core

MODES = ("off", "measure", "profile", "optimize")
# The most characters of a profile read from profile= (model::kMaxInputFileBytes).
MAX_PROFILE_CHARS = 256 << 20


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


def read_profile(path: str) -> str:
    """The profile CSV at `path` (profile=), bounded like every file joulepipe
    reads (model::ReadWholeFile): profile=/dev/zero must not read forever.
    ValueError names the file and why."""
    try:
        with open(path) as f:
            csv = f.read(MAX_PROFILE_CHARS + 1)
    except (OSError, UnicodeDecodeError) as error:
        why = getattr(error, "strerror", None) or str(error)
        raise ValueError(f"cannot read the profile {path}: {why}") from None
    if len(csv) > MAX_PROFILE_CHARS:
        raise ValueError(f"the profile {path} is larger than 256 MiB; give the path of a "
                         "profile CSV (joulepipe's are far smaller)")
    return csv

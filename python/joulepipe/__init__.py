"""joulepipe: less GPU energy for pipeline-parallel training at the same speed.

The native library (``joulepipe._core``) does the work: measurement windows
and the per-step energy log, the planner (the iteration time-energy
frontier), the in-situ profiler, the coordination policy and the per-rank
runtime that applies a clock per forward/backward off the training thread.
This package adds the integrations: ``joulepipe.pytorch`` for custom
PyTorch loops (step and forward/backward contexts; modes measure, profile,
optimize) and ``joulepipe.megatron`` for unmodified megatron-core behind one
option (``enable("optimize", plan=...)`` or ``-m joulepipe.megatron.run
--joulepipe optimize``). docs/python.md and docs/megatron.md.

Errors are Python exceptions with the library's messages:
``InputError`` (a ValueError; ``.field`` names what to change),
``GpuError``, ``JobStateError``.
"""

from joulepipe._core import (  # noqa: F401  (re-exported)
    Agent,
    Cancelled,
    CoordinatedPlan,
    CoordinatorClient,
    CoordJob,
    Frontier,
    GpuError,
    InputError,
    InSituProfiler,
    JobStateError,
    Kind,
    Measurement,
    Monitor,
    PipelinePlan,
    Plan,
    PowerTrace,
    Profile,
    ProfileMetadata,
    ProfileReport,
    StepLogger,
    candidate_clocks,
    evaluate_plan,
    gpus,
    join_power_traces,
    measure_command,
    merge_reports,
    plan_pipeline,
    plan_power_limits,
    read_profile,
    simulate,
    simulate_profile,
    estimate_memory,
    tune,
    version as __version__,
)
from joulepipe._paths import sim_nvml_library_dir  # noqa: F401

__all__ = [
    "Agent",
    "Cancelled",
    "CoordinatedPlan",
    "CoordinatorClient",
    "CoordJob",
    "Frontier",
    "GpuError",
    "InputError",
    "InSituProfiler",
    "JobStateError",
    "Kind",
    "Measurement",
    "Monitor",
    "measure_command",
    "PipelinePlan",
    "Plan",
    "PowerTrace",
    "Profile",
    "ProfileMetadata",
    "ProfileReport",
    "StepLogger",
    "candidate_clocks",
    "evaluate_plan",
    "gpus",
    "join_power_traces",
    "merge_reports",
    "plan_pipeline",
    "plan_power_limits",
    "read_profile",
    "simulate",
    "simulate_profile",
    "estimate_memory",
    "tune",
    "sim_nvml_library_dir",
    "__version__",
]

"""joulepipe's command-line flags for Megatron-LM scripts.

``add_arguments`` has the signature of Megatron's ``extra_args_provider``
(it takes the parser and returns it), so a script that builds its own
arguments can pass it to ``pretrain(..., extra_args_provider=add_arguments)``
and then call ``joulepipe.megatron.enable_from_args(get_args())``.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(
        "joulepipe", "GPU energy: measure it per iteration, or cut it at the same speed "
                     "(docs/megatron.md)")
    group.add_argument(
        "--joulepipe", choices=["off", "measure", "profile", "optimize"], default="off",
        help="off: nothing. measure: time, GPU energy, power, tokens/s and J/token per "
             "iteration, clocks untouched. profile: measure, profile the stages in situ during "
             "the first iterations, plan and log the predicted saving, clocks back to default. "
             "optimize: profile (or --joulepipe-profile), plan, run every forward/backward at "
             "its planned SM clock and switch plans when a data-parallel pipeline straggles.")
    group.add_argument(
        "--joulepipe-plan", metavar="DIR", default=None,
        help="optimize: apply this plan (a `joulepipe plan --out` DIR or a plan file) from the "
             "first iteration; each rank takes its pipeline stage's plan")
    group.add_argument(
        "--joulepipe-coordinator", metavar="URL", default=None,
        help="URL of `joulepipe serve` (e.g. http://10.0.0.1:8470). Default: rank 0 runs the "
             "coordination policy itself over a side process group; nothing else to run.")
    group.add_argument(
        "--joulepipe-coordinator-token-file", metavar="PATH", default=None,
        help="file holding the bearer token of `joulepipe serve --token-file`")
    group.add_argument(
        "--joulepipe-max-slowdown", metavar="F", type=float, default=1.0,
        help="iteration time the plan may take relative to all-max clocks, 1.0..2.0 "
             "(default 1.0: no slowdown; 1.05 trades up to 5%% time for more saving)")
    group.add_argument(
        "--joulepipe-daemon-socket", metavar="PATH", default=None,
        help="joulepiped's socket (default /run/joulepiped.sock). Clocks go through the daemon "
             "when the socket exists, so the job needs no privilege; else NVML directly")
    group.add_argument(
        "--joulepipe-control", choices=["auto", "daemon", "nvml"], default="auto",
        help="how clocks are set (default auto: the daemon if its socket exists, else NVML)")
    group.add_argument(
        "--joulepipe-profile", metavar="CSV", default=None,
        help="plan from this stage profile instead of profiling in situ")
    group.add_argument(
        "--joulepipe-profile-out", metavar="CSV", default=None,
        help="rank 0 writes the measured profile here (reuse it with --joulepipe-profile)")
    group.add_argument(
        "--joulepipe-profile-stride-mhz", metavar="MHZ", type=int, default=0,
        help="profile every MHZ-th clock only (default 0: every supported clock down to 0.6 x max)")
    group.add_argument(
        "--joulepipe-log", metavar="PATH", default=None,
        help="per-rank iteration log, CSV or .jsonl; {rank} in the path is the rank")
    group.add_argument(
        "--joulepipe-log-rank", metavar="R", type=int, default=None,
        help="iteration, evaluation and checkpoint lines from rank R only (default: every "
             "rank's, each naming its rank); notes and warnings still come from every rank, "
             "and --joulepipe-log still gets every rank's iterations")
    group.add_argument(
        "--joulepipe-job-id", metavar="ID", default=None,
        help="the job's name at the coordinator (default: generated)")
    group.add_argument(
        "--joulepipe-power-trace", metavar="PATH", default=None,
        help="each rank's GPU power over time, with its step ends, into PATH ({rank} is the "
             "rank; never replaced); the job's power: joulepipe power --join")
    group.add_argument(
        "--joulepipe-power-trace-ms", metavar="MS", type=float, default=10.0,
        help="the power trace's sampling interval (default 10 ms)")
    group.add_argument(
        "--joulepipe-power-trace-s", metavar="S", type=float, default=60.0,
        help="how long the power trace records from the first iteration (default 60 s)")
    return parser


def options_from_args(args: Any) -> Dict[str, Any]:
    """enable()'s keyword arguments from parsed flags."""
    token = None
    path = getattr(args, "joulepipe_coordinator_token_file", None)
    if path:
        try:
            with open(path) as f:
                token = f.read().strip()
        except OSError as error:
            raise ValueError(f"--joulepipe-coordinator-token-file {path}: {error.strerror}") from None
    return {
        "mode": getattr(args, "joulepipe", "off"),
        "plan": getattr(args, "joulepipe_plan", None),
        "coordinator": getattr(args, "joulepipe_coordinator", None),
        "coordinator_token": token,
        "max_slowdown": getattr(args, "joulepipe_max_slowdown", 1.0),
        "daemon_socket": getattr(args, "joulepipe_daemon_socket", None),
        "control": getattr(args, "joulepipe_control", "auto"),
        "profile": getattr(args, "joulepipe_profile", None),
        "profile_out": getattr(args, "joulepipe_profile_out", None),
        "profile_stride_mhz": getattr(args, "joulepipe_profile_stride_mhz", 0),
        "log_path": getattr(args, "joulepipe_log", None),
        "job_id": getattr(args, "joulepipe_job_id", None),
        "log_rank": getattr(args, "joulepipe_log_rank", None),
        "power_trace": getattr(args, "joulepipe_power_trace", None),
        "power_trace_ms": getattr(args, "joulepipe_power_trace_ms", 10.0),
        "power_trace_s": getattr(args, "joulepipe_power_trace_s", 60.0),
    }

"""Where a rank's work runs: its GPU (as _core.gpus() lists it) and the CUDA
stream the training launches on, so that clocks and measurements land where
the GPU is (runtime/device_markers.hpp, runtime/device_meter.hpp)."""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Tuple

from joulepipe import _core
from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug


def find_gpu(local_rank: int, note: Callable[[str], None]) -> Optional[Dict[str, Any]]:
    """This rank's GPU: PyTorch's current device when CUDA is available,
    else the one at `local_rank`; None (said) without one."""
    try:
        devices = _core.gpus()
    except Exception as error:
        note(f"no GPU energy or clock control: {error}")
        return None
    if not devices:
        note("no GPU is visible; logging time only")
        return None
    try:
        if _core.nvml_simulated():
            note(_core.nvml_methodology().rstrip("."))
    except Exception:
        _logger.debug("find_gpu: error ignored", exc_info=True)
    index = local_rank
    try:
        import torch
        if torch.cuda.is_available():
            index = torch.cuda.current_device()
    except Exception:
        _logger.debug("find_gpu: error ignored", exc_info=True)
    for device in devices:
        if device["index"] == index:
            return device
    return devices[index % len(devices)]


def training_stream(stream: Optional[int]) -> Tuple[Optional[int], Optional[str]]:
    """The CUstream the training launches on: `stream` (the option), else
    PyTorch's current stream when CUDA is available; (None, why) on a
    broken CUDA set-up, (None, None) without CUDA."""
    if stream is not None:
        return int(stream), None
    # Only a program that imported torch launches on torch's streams
    # (and importing it here would cost seconds).
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_stream().cuda_stream), None
    except Exception as error:  # a broken CUDA set-up: the host's points
        return None, f"no CUDA stream ({error})"
    return None, None


def follow_stream(agent: Any, stream_option: Optional[int], mode: str,
                  note: Callable[[str], None]) -> None:
    """Clocks where the GPU is: `agent` marks each hook on the training's
    stream (runtime/device_markers.hpp) when there is one, and profile mode
    times each instruction there (runtime/device_meter.hpp); otherwise the
    host's points, said once."""
    stream, broken = training_stream(stream_option)
    if broken is not None:
        note(f"clocks change at the host's hook points: {broken}")
        return
    if stream is None:
        if mode != "measure":
            note("no CUDA stream (no CUDA here): clocks change at the host's hook points "
                 "(profile rows are timed there too), exact where the host waits for the GPU "
                 "at each instruction")
        return
    ok, why = agent.set_stream(int(stream))
    if not ok:
        note(f"clocks change at the host's hook points: {why}")

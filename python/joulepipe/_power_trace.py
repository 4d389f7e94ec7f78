"""A rank's GPU power over time (the power_trace option): sampled natively
from the session's start, with each step's end marked, and written once the
trace is over (on a thread) or at close."""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional

from joulepipe import _core
from joulepipe._options import Options, Topology, power_trace_path


class PowerTraceRecorder:
    """Records `gpu`'s power for the session (nothing without power_trace, or
    without a GPU, said). Never raises into training."""

    def __init__(self, options: Options, topology: Topology, gpu: Optional[Dict[str, Any]],
                 note: Callable[[str], None]) -> None:
        self._options = options
        self._topo = topology
        self._gpu = gpu
        self._note = note
        self._trace: Any = None
        self._writer: Optional[threading.Thread] = None
        if not options.power_trace:
            return
        path = power_trace_path(options, topology)
        if gpu is None:
            note(f"power_trace: no GPU to trace; {path} is not written")
            return
        try:
            self._trace = _core.PowerTrace(gpu["nvml_index"],
                                           interval_s=options.power_trace_ms / 1000,
                                           duration_s=options.power_trace_s)
        except Exception as error:
            note(f"power_trace: cannot record this GPU's power ({error}); {path} is not "
                 "written, training goes on")
            return
        note(f"recording GPU {gpu['index']}'s power every {options.power_trace_ms:g} ms for "
             f"{options.power_trace_s:g} s into {path}")

    def step_end(self, iteration: int) -> None:
        """Marks the end of training step `iteration`; a trace that is over
        is written on a thread (a day's trace is seconds of writing, not the
        training thread's)."""
        if self._trace is None:
            return
        self._trace.mark_step_end(iteration)
        if self._trace.done:
            trace, self._trace = self._trace, None
            self._writer = threading.Thread(target=self._write, args=(trace,),
                                            name="joulepipe-power-trace", daemon=True)
            self._writer.start()

    def close(self) -> None:
        """Writes a trace still recording at once, or waits for the write
        still running (at most 120 s)."""
        trace, self._trace = self._trace, None
        if trace is not None:
            self._write(trace)
            return
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.join(timeout=120)

    def _write(self, trace: Any) -> None:
        """The file, and one line."""
        path = power_trace_path(self._options, self._topo)
        try:
            got = trace.write(path, self._topo.rank, self._gpu.get("name", "") if self._gpu else "")
        except Exception as error:
            self._note(f"power_trace: could not write {path}: {error}")
            return
        errors = f", {got['read_errors']} failed reads" if got["read_errors"] else ""
        pattern = power_trace_path(self._options, self._topo, rank="*")
        join = (f"; the job's power: joulepipe power --join {pattern}" if self._topo.rank == 0
                else "")
        self._note(f"power trace written to {path}: {got['samples']} samples over "
                   f"{got['seconds']:.1f} s, {got['step_ends']} step ends{errors}{join}")

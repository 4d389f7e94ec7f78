"""Clocks given back on every way out of a training process.

Real NVML keeps locked clocks after the process that locked them exits, so a
rank that changed its GPU's clocks must give them back however it ends. Every
session that may change clocks (profile and optimize modes) is watched here
from the moment its clock agent exists until it is closed:

* a normal end without ``disable()`` / ``close()``, ``sys.exit()`` from
  inside training (Megatron's ``--exit-interval``, ``--exit-duration-in-mins``,
  its signal handler), an uncaught exception: one ``atexit`` handler gives
  every watched session's clocks back, then closes it;
* SIGTERM and SIGINT (what torchrun, SLURM and Ctrl-C send): a handler gives
  the clocks back at once, then does what the signal did before joulepipe was
  there: the previous Python handler (Megatron's, ``KeyboardInterrupt`` for
  SIGINT) or the default action (the process ends by that signal). A signal
  the process ignores (``nohup``, a job started with ``&`` from a script)
  is left ignored: it ends nothing, so it gives nothing back either;
* SIGKILL, a crash of the interpreter, ``os._exit``: nothing in the process
  runs. Only joulepiped covers these (``control="daemon"``, or ``"auto"``
  when its socket exists): it restores the GPU when the rank's connection
  closes.

Giving the clocks back is ``Agent.close()``: default clocks restored
synchronously (NVML or the daemon), the controller thread joined, and every
hook a no-op from then on, so training code that goes on after a signal (a
handler that only sets a flag) runs at default clocks and never sees an
error. Signal handlers can only be set from the main thread; a session
started elsewhere is covered by the ``atexit`` handler alone.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from typing import Any, Dict

from joulepipe._log import logger as _logger  # errors ignored on purpose, at debug

_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_lock = threading.Lock()
_sessions: "weakref.WeakSet[Any]" = weakref.WeakSet()
_at_exit_registered = False
# What each signal did before joulepipe's handler replaced it.
_previous: Dict[int, Any] = {}


def watch(session: Any) -> None:
    """From now until forget(session): `session.give_back(why)` on every way
    out. Installs the handlers (again, when something replaced them)."""
    global _at_exit_registered
    with _lock:
        _sessions.add(session)
        if not _at_exit_registered:
            atexit.register(_at_exit)
            _at_exit_registered = True
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _SIGNALS:
        try:
            current = signal.getsignal(sig)
            # Ignored stays ignored: handling it would give the clocks back
            # and let training go on at default clocks, for a signal the
            # user's launcher chose to have no effect.
            if current is _on_signal or current == signal.SIG_IGN:
                continue
            signal.signal(sig, _on_signal)
            _previous[sig] = current
        except (ValueError, OSError):  # not settable here (embedded interpreters)
            pass


def forget(session: Any) -> None:
    with _lock:
        _sessions.discard(session)


def watched() -> int:
    """How many sessions are watched now (tests)."""
    with _lock:
        return len(_sessions)


def _give_back_all(why: str) -> None:
    with _lock:
        sessions = list(_sessions)
    for session in sessions:
        try:
            session.give_back(why)
        except Exception:  # one session's failure never stops the others
            _logger.debug("_give_back_all: error ignored", exc_info=True)


def _at_exit() -> None:
    _give_back_all("the process is exiting")
    with _lock:
        sessions = list(_sessions)
    for session in sessions:
        try:
            session.close()
        except Exception:
            _logger.debug("_at_exit: error ignored", exc_info=True)


def _on_signal(signum: int, frame: Any) -> Any:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    _give_back_all(f"{name} received")
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        return previous(signum, frame)
    if previous == signal.SIG_IGN:  # ignored after watch() (it skips ignored ones)
        return None
    # The default action (or a handler set outside Python, which cannot be
    # called from here): end the process by this signal, as it would have.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return None

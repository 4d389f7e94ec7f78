// What SIGINT, SIGTERM and SIGHUP do to `joulepipe`: stop it without leaving
// a partial output behind.
//
// main() installs the handlers (InstallInterruptHandlers) and ends through
// FinishProcess. A signal is handled one of two ways:
//
//   * Inside a CancellableScope (`plan`), the first signal only raises
//     InterruptFlag(), the cancel flag the command passed to the library
//     (solver::PlanRequest::cancel, StagedDirectory::Commit). The library
//     throws model::Cancelled, the stack unwinds (the destructors remove the
//     staging directory), app.cpp turns the exception into
//     InterruptedExitCode(), and FinishProcess says so and ends the process.
//   * Otherwise, and on a second signal, the handler itself removes every
//     live staging directory and temporary file (model::RemoveLiveTemporaries,
//     async-signal-safe), writes the message and ends the process at once.
//
// Either way stderr gets "joulepipe: interrupted (SIGINT); nothing was
// written" (or, when an output was already complete, that it was kept), and
// the process ends killed by that signal (the default action, re-raised), so
// its parent sees the signal and a shell shows $? = 128 + N: 130 for SIGINT,
// 143 for SIGTERM, 129 for SIGHUP. Re-raising rather than exit(128 + N) is
// what lets a shell loop around joulepipe stop on Ctrl-C.
//
// A signal that was ignored when joulepipe started (nohup, `cmd &` in a
// script) stays ignored. `measure` and `power` block these signals and take
// them themselves (measure_command.hpp, power_command.hpp).
#pragma once

#include <signal.h>

#include <atomic>
#include <initializer_list>
#include <string>

#include "joulepipe/monitor/taken_signals.hpp"

namespace joulepipe::cli {

// Installs the handlers for SIGINT, SIGTERM and SIGHUP (those not ignored).
void InstallInterruptHandlers();

// The flag a signal raises: pass it as the cancel flag of library calls.
const std::atomic<bool>* InterruptFlag();

// While one is alive, the first signal only raises InterruptFlag(): the
// command must pass the flag to every long call and to its commits (so that
// it stops and unwinds). Not nestable.
class CancellableScope {
 public:
  CancellableScope();
  ~CancellableScope();
  CancellableScope(const CancellableScope&) = delete;
  CancellableScope& operator=(const CancellableScope&) = delete;
};

// 128 + InterruptSignal() (SIGINT if none): what RunApp returns for a
// command stopped by model::Cancelled.
int InterruptedExitCode();

// The end of main(): returns `code`, or, if a signal interrupted the command,
// prints the message and ends the process by that signal.
int FinishProcess(int code);

// TakenSignals and SignalName live in the monitor part (a measured
// command's supervisor uses them: joulepipe/monitor/command_window.hpp).
using monitor::SignalName;
using monitor::TakenSignals;

}  // namespace joulepipe::cli

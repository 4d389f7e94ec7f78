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

// For commands that take signals themselves (`measure` forwards them to its
// command, `power` stops on them): blocks SIGHUP, SIGINT, SIGQUIT, SIGTERM,
// SIGUSR1 and SIGUSR2, except those ignored (SIG_IGN) when joulepipe started
// (so `nohup joulepipe measure ...` keeps its command immune to SIGHUP), plus
// `also_blocked` (e.g. SIGCHLD), in the calling thread and the threads it
// starts from now on, and reads them all from fd() (a non-blocking
// signalfd). On destruction, drops what is still pending and restores the
// mask, so that a late signal never reaches the interrupt handler.
class TakenSignals {
 public:
  explicit TakenSignals(std::initializer_list<int> also_blocked = {});
  ~TakenSignals();
  TakenSignals(const TakenSignals&) = delete;
  TakenSignals& operator=(const TakenSignals&) = delete;

  int fd() const { return fd_; }  // readable when one is pending
  // The next pending blocked signal (0 if none), without waiting.
  int Next();
  // Waits up to `seconds` (< 0: forever) for one; 0 on timeout.
  int Wait(double seconds);
  // Whether `sig` is one of the list above that was not ignored.
  bool Takes(int sig) const { return sigismember(&taken_, sig) == 1; }
  // Those signals, and the mask the thread had before, which a child should
  // start with.
  const sigset_t& taken() const { return taken_; }
  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t taken_;
  sigset_t blocked_;
  sigset_t old_;
  int fd_ = -1;
};

// "SIGHUP", "SIGUSR1", ...; "signal N" for others.
std::string SignalName(int sig);

}  // namespace joulepipe::cli

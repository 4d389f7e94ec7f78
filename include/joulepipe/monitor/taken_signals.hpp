// Signals a process takes itself instead of dying of them: `measure`
// forwards them to its command (command_window.hpp), `power` and `serve`
// stop on them.
#pragma once

#include <signal.h>

#include <initializer_list>
#include <string>

namespace joulepipe::monitor {

// Blocks SIGHUP, SIGINT, SIGQUIT, SIGTERM,
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

}  // namespace joulepipe::monitor

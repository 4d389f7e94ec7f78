// SIGINT, SIGTERM and SIGHUP for every subcommand (signals.hpp): raise the
// cancel flag inside a CancellableScope, otherwise remove the live temporaries
// and end the process by the signal. The handler uses async-signal-safe calls
// only: atomics, write, sigaction, sigprocmask, raise, _exit, and
// model::RemoveLiveTemporaries.
#include "signals.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "joulepipe/model/output_files.hpp"

namespace joulepipe::cli {

namespace {

constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<bool> g_flag{false};         // InterruptFlag()
std::atomic<int> g_signal{0};            // the first signal
std::atomic<int> g_count{0};             // signals received
std::atomic<bool> g_cooperative{false};  // a CancellableScope is alive

// Async-signal-safe: a constant for the signals the handler serves.
const char* HandledSignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

void WriteString(const char* text) {
  std::size_t n = 0;
  while (text[n] != '\0') ++n;
  while (n > 0) {
    const ssize_t done = ::write(STDERR_FILENO, text, n);
    if (done <= 0) return;  // stderr gone: nothing else to try
    text += done;
    n -= static_cast<std::size_t>(done);
  }
}

// "joulepipe: interrupted (SIGINT); nothing was written". Async-signal-safe.
void WriteInterruptedMessage(int sig) {
  WriteString("joulepipe: interrupted (");
  WriteString(HandledSignalName(sig));
  WriteString(model::CommittedOutputs() == 0
                  ? "); nothing was written\n"
                  : "); the outputs completed before it were kept, nothing partial was left\n");
}

// Ends the process by `sig`'s default action (termination), so the parent
// sees the signal; exits 128 + sig should that not end it.
[[noreturn]] void DieBy(int sig) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::raise(sig);                               // pending while blocked (inside the handler) ...
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);  // ... and delivered here
  ::_exit(128 + sig);
}

void OnSignal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  g_flag.store(true);
  if (g_count.fetch_add(1) == 0 && g_cooperative.load()) return;  // the command unwinds
  model::RemoveLiveTemporaries();
  WriteInterruptedMessage(sig);
  DieBy(sig);
}

}  // namespace

void InstallInterruptHandlers() {
  for (int sig : kHandled) {
    struct sigaction old = {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    for (int other : kHandled) sigaddset(&action.sa_mask, other);  // handlers never nest
    action.sa_flags = SA_RESTART;
    ::sigaction(sig, &action, nullptr);
  }
}

const std::atomic<bool>* InterruptFlag() {
  return &g_flag;
}

CancellableScope::CancellableScope() {
  g_cooperative.store(true);
}

CancellableScope::~CancellableScope() {
  g_cooperative.store(false);
}

int InterruptedExitCode() {
  const int sig = g_signal.load();
  return 128 + (sig != 0 ? sig : SIGINT);
}

int FinishProcess(int code) {
  const int sig = g_signal.load();
  if (sig == 0) return code;
  std::fflush(stdout);
  std::fflush(stderr);
  WriteInterruptedMessage(sig);
  DieBy(sig);
}

}  // namespace joulepipe::cli

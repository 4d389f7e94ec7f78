// TakenSignals and SignalName (taken_signals.hpp).
#include "joulepipe/monitor/taken_signals.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace joulepipe::monitor {

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGKILL:
      return "SIGKILL";
    case SIGPIPE:
      return "SIGPIPE";
    default:
      return "signal " + std::to_string(sig);
  }
}

TakenSignals::TakenSignals(std::initializer_list<int> also_blocked) {
  sigemptyset(&taken_);
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2}) {
    struct sigaction current = {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&taken_, sig);
  }
  blocked_ = taken_;
  for (int sig : also_blocked) sigaddset(&blocked_, sig);
  pthread_sigmask(SIG_BLOCK, &blocked_, &old_);
  fd_ = ::signalfd(-1, &blocked_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    throw std::runtime_error(std::string("signalfd failed: ") + std::strerror(error));
  }
}

TakenSignals::~TakenSignals() {
  // Drop what is still pending before unblocking.
  const timespec zero{0, 0};
  while (sigtimedwait(&blocked_, nullptr, &zero) > 0) {
  }
  ::close(fd_);
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

int TakenSignals::Next() {
  signalfd_siginfo info;
  for (;;) {
    const ssize_t n = ::read(fd_, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

int TakenSignals::Wait(double seconds) {
  pollfd p{fd_, POLLIN, 0};
  const int timeout_ms = seconds < 0 ? -1 : static_cast<int>(std::ceil(seconds * 1e3));
  const int ready = ::poll(&p, 1, timeout_ms);
  return ready > 0 ? Next() : 0;
}

}  // namespace joulepipe::monitor

// RunInWindow (command_window.hpp): the command's process group, the
// terminal hand-over, signal forwarding and the wait on a pidfd.
#include "joulepipe/monitor/command_window.hpp"

#include "spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace joulepipe::monitor {

namespace {

// The controlling terminal, when joulepipe runs in its foreground process
// group: then the command's group gets the terminal for its run (so that it
// reads the terminal and takes Ctrl-C and Ctrl-Z as it would without
// joulepipe) and joulepipe takes it back afterwards. Otherwise (no terminal,
// a background job, a batch system) the command's group runs without it and
// joulepipe forwards the signals it is sent.
class Terminal {
 public:
  Terminal() {
    fd_ = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    foreground_ = fd_ >= 0 && ::tcgetpgrp(fd_) == ::getpgrp();
  }
  ~Terminal() {
    TakeBack();
    if (fd_ >= 0) ::close(fd_);
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  int fd() const { return fd_; }
  // A terminal exists: a job-control shell may be watching, so a stopped
  // command stops joulepipe too (StopWithCommand).
  bool present() const { return fd_ >= 0; }
  bool foreground() const { return foreground_; }
  void GivenTo(pid_t pgid) { given_to_ = pgid; }

  // Back to joulepipe's group if the command's group holds it. Needs SIGTTOU
  // blocked (joulepipe is then a background process).
  void TakeBack() {
    if (given_to_ > 0 && ::tcgetpgrp(fd_) == given_to_) ::tcsetpgrp(fd_, ::getpgrp());
    given_to_ = 0;
  }

  // The command stopped (Ctrl-Z, or it read the terminal from the
  // background): take the terminal back and stop joulepipe too, so that the
  // shell sees the job stopped; once continued (fg or bg), hand the terminal
  // over again if joulepipe has it, and continue the command's group.
  void StopWithCommand(pid_t pgid) {
    TakeBack();
    ::kill(::getpid(), SIGSTOP);
    if (::tcgetpgrp(fd_) == ::getpgrp() && ::tcsetpgrp(fd_, pgid) == 0) given_to_ = pgid;
    ::kill(-pgid, SIGCONT);
  }

 private:
  int fd_ = -1;
  bool foreground_ = false;
  pid_t given_to_ = 0;
};

// A descriptor that becomes readable when `pid` exits (pidfd_open, Linux
// 5.3), or -1: then SIGCHLD (taken through the signalfd) tells instead.
int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// SIGCHLD at its default action in the command (joulepipe takes it).
sigset_t SigchldOnly() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  return set;
}

// Sends `sig` to the command's process group (the command and everything it
// started that stayed in the group); to the command alone should the group
// be gone.
void Forward(pid_t pgid, int sig) {
  if (::kill(-pgid, sig) != 0 && errno == ESRCH) ::kill(pgid, sig);
}

// Waits for the command to end, forwarding the signals taken meanwhile.
// Wakes on the command's exit through its pidfd (or SIGCHLD), so the caller
// ends the window within a millisecond of it. Returns the wait status.
int WaitForwarding(pid_t pid, TakenSignals* signals, Terminal* terminal) {
  const int pidfd = OpenPidfd(pid);
  const int options = WNOHANG | (terminal->present() ? WUNTRACED : 0);
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, options);
    if (done == pid && WIFSTOPPED(status)) {
      const int sig = WSTOPSIG(status);
      if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) terminal->StopWithCommand(pid);
      continue;
    }
    if (done == pid) {
      if (pidfd >= 0) ::close(pidfd);
      return status;
    }
    if (done < 0 && errno != EINTR) {
      const int error = errno;
      if (pidfd >= 0) ::close(pidfd);
      throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(error));
    }
    pollfd fds[2] = {{signals->fd(), POLLIN, 0}, {pidfd, POLLIN, 0}};
    ::poll(fds, pidfd >= 0 ? 2 : 1, -1);
    for (int sig = signals->Next(); sig != 0; sig = signals->Next()) {
      if (signals->Takes(sig)) Forward(pid, sig);  // SIGCHLD: just look again
    }
  }
}

// A signal to stop joulepipe already pending before the command starts: it
// is not started at all. Returns it, or 0.
int PendingStopSignal(const TakenSignals& signals) {
  sigset_t pending;
  sigpending(&pending);
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM}) {
    if (sigismember(&pending, sig) && signals.Takes(sig)) return sig;
  }
  return 0;
}

}  // namespace

std::unique_ptr<TakenSignals> TakeSignalsForCommand() {
  auto signals = std::make_unique<TakenSignals>(std::initializer_list<int>{SIGCHLD, SIGTTOU});
  struct sigaction chld = {};
  chld.sa_handler = SIG_DFL;  // an inherited SIG_IGN would reap the command behind our back
  sigemptyset(&chld.sa_mask);
  ::sigaction(SIGCHLD, &chld, nullptr);
  return signals;
}

CommandRun RunInWindow(Monitor& monitor, const std::vector<std::string>& command,
                       TakenSignals& signals) {
  if (command.empty()) throw std::invalid_argument("RunInWindow: the command is empty");
  CommandRun r;
  Terminal terminal;  // restores the terminal's group on every way out
  monitor.Begin("command", Edges::kAligned);
  const auto t0 = std::chrono::steady_clock::now();
  if (const int sig = PendingStopSignal(signals)) {
    monitor.End("command");
    r.not_run = "interrupted (" + SignalName(sig) + ") before the command started; it was not run";
    r.exit_code = 128 + sig;
    return r;
  }
  int error = 0;
  const pid_t pid = Spawn(command, signals.old_mask(), SigchldOnly(),
                          terminal.foreground() ? terminal.fd() : -1, &error);
  if (pid < 0) {
    monitor.End("command");
    r.not_run = "cannot run " + command[0] + ": " + std::strerror(error);
    r.exit_code = kExitCannotRun;
    return r;
  }
  r.started = true;
  if (terminal.foreground()) terminal.GivenTo(pid);
  const int status = WaitForwarding(pid, &signals, &terminal);
  const auto t1 = std::chrono::steady_clock::now();
  terminal.TakeBack();
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
    r.exit_note = "killed by " + SignalName(WTERMSIG(status));
  } else {
    r.exit_code = 1;
  }
  try {
    r.measurement = monitor.End("command");
  } catch (const std::exception& e) {
    // Not a GPU (those are tolerated): RAPL, or anything else. The
    // command's result stands; the run says what failed.
    r.measure_error = e.what();
    r.measurement = Measurement{};
    r.measurement.duration_s = std::chrono::duration<double>(t1 - t0).count();
  }
  return r;
}

}  // namespace joulepipe::monitor

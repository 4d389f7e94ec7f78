// Helpers for the CLI tests that signal a running joulepipe: start it in the
// background with its output in files (or on a pseudo-terminal), wait for a
// file or a line to appear, and collect its wait status with a deadline.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_support.hpp"

namespace joulepipe::cli::testing {

// Starts the joulepipe binary with `args`, stdin from /dev/null, stdout and
// stderr into the given files, with SIGINT and SIGTERM at their defaults
// (as from an interactive shell, not a script's background job).
inline pid_t StartCli(const std::vector<std::string>& args, const fs::path& out,
                      const fs::path& err) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int in = ::open("/dev/null", O_RDONLY);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv{const_cast<char*>(JOULEPIPE_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(JOULEPIPE_CLI, argv.data());
    ::_exit(99);
  }
  return pid;
}

// Polls `ready` every 10 ms for up to `timeout_s`; true once it holds.
inline bool WaitUntil(const std::function<bool()>& ready, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Whether `pid` (our child) has not exited yet; does not reap it.
inline bool StillRunning(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

// Reaps `pid` within `timeout_s`; after that kills it (SIGKILL), fails the
// test and returns -1.
inline int WaitStatus(pid_t pid, double timeout_s) {
  int status = 0;
  if (!WaitUntil([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout_s)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "joulepipe (pid " << pid << ") still ran after " << timeout_s << " s";
    return -1;
  }
  return status;
}

// The exit code a shell shows for a wait status: 128 + N for signal N.
inline int ShellCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// joulepipe on a new pseudo-terminal, as the session leader with the
// terminal as its controlling terminal and itself in the foreground, as a
// shell would start it. Read() collects what it writes to the terminal.
class PtyCli {
 public:
  explicit PtyCli(const std::vector<std::string>& args) {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
    const std::string slave_name = ::ptsname(master_);
    std::fflush(stdout);
    std::fflush(stderr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setsid();
      const int slave = ::open(slave_name.c_str(), O_RDWR);
      ::ioctl(slave, TIOCSCTTY, 0);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU}) {
        ::signal(sig, SIG_DFL);
      }
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::dup2(slave, 0);
      ::dup2(slave, 1);
      ::dup2(slave, 2);
      ::close(master_);
      std::vector<char*> argv{const_cast<char*>(JOULEPIPE_CLI)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(JOULEPIPE_CLI, argv.data());
      ::_exit(99);
    }
  }
  ~PtyCli() {
    if (pid_ > 0 && StillRunning(pid_)) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  PtyCli(const PtyCli&) = delete;
  PtyCli& operator=(const PtyCli&) = delete;

  pid_t pid() const { return pid_; }
  bool ok() const { return master_ >= 0 && pid_ > 0; }

  // Types `text` at the terminal (the line discipline turns "\x03" into
  // SIGINT for the foreground process group).
  void Type(const std::string& text) { (void)!::write(master_, text.data(), text.size()); }

  // Reads what arrived within `timeout_s` until `needle` shows; returns all
  // read so far.
  const std::string& ReadUntil(const std::string& needle, double timeout_s) {
    WaitUntil(
        [&] {
          pollfd p{master_, POLLIN, 0};
          while (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
            char buffer[4096];
            const ssize_t n = ::read(master_, buffer, sizeof buffer);
            if (n <= 0) return true;  // hung up: nothing more will come
            seen_.append(buffer, static_cast<size_t>(n));
          }
          return seen_.find(needle) != std::string::npos;
        },
        timeout_s);
    return seen_;
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  std::string seen_;
};

}  // namespace joulepipe::cli::testing

#include "joulepipe/monitor/background_command.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "spawn.hpp"

namespace joulepipe::monitor {

BackgroundCommand::BackgroundCommand(const std::vector<std::string>& command) {
  if (command.empty()) throw std::invalid_argument("BackgroundCommand: an empty command");
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
  int error = 0;
  pid_ = Spawn(command, none, defaults, /*tty_fd=*/-1, &error);
  if (pid_ < 0) throw std::system_error(error, std::generic_category(), command[0]);
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ <= 0 || exit_) return;
  ::kill(-pid_, SIGTERM);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(stop_timeout_s);
  while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<BackgroundCommand::Exit> BackgroundCommand::Ended() {
  if (exit_ || pid_ <= 0) return exit_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  Exit e;
  e.signaled = WIFSIGNALED(status);
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  e.signal = e.signaled ? WTERMSIG(status) : 0;
  exit_ = e;
  return exit_;
}

}  // namespace joulepipe::monitor

// A command that runs beside a measurement and is stopped when it is no
// longer needed (e.g. the load that keeps a GPU waiting while `joulepipe
// calibrate-wait` measures it): started in a process group of its own with
// default handling of the stop signals, so that stopping the group stops it
// and everything it started; stopped on every way out of its owner.
//
//   monitor::BackgroundCommand load({"python", "-m", "joulepipe.wait_load"});
//   ... measure; load.Ended() says whether it is still running ...
//   // ~BackgroundCommand: SIGTERM to the group, SIGKILL after 5 s
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace joulepipe::monitor {

class BackgroundCommand {
 public:
  // How the command ended on its own.
  struct Exit {
    bool signaled = false;  // killed by `signal`, else exited with `code`
    int code = 0;
    int signal = 0;
  };

  // Starts `command` (PATH lookup; not empty) with an empty signal mask and
  // SIGINT, SIGTERM, SIGHUP and SIGQUIT at their default action. Throws
  // std::system_error (the errno of posix_spawnp) when it cannot start.
  explicit BackgroundCommand(const std::vector<std::string>& command);
  // Stops the group: SIGTERM, then SIGKILL after `stop_timeout_s`; reaps it.
  ~BackgroundCommand();
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  // nullopt while it runs; how it ended once it has (reaped; asked again,
  // the same answer).
  std::optional<Exit> Ended();
  pid_t pid() const { return pid_; }

  double stop_timeout_s = 5;

 private:
  pid_t pid_ = -1;
  std::optional<Exit> exit_;
};

}  // namespace joulepipe::monitor

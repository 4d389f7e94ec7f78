// Starting a command in a process group of its own: the one way monitor
// starts commands (RunInWindow, BackgroundCommand). Private to monitor.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace joulepipe::monitor {

// Starts `command` (PATH lookup) in a new process group of its own, with
// signal mask `mask` and the signals in `defaults` at their default action
// (handlers are reset by exec; other ignored signals stay ignored). With
// `tty_fd` >= 0 the new group also becomes the terminal's foreground group
// before exec. Returns the pid, or -1 with *error set (an errno value).
pid_t Spawn(const std::vector<std::string>& command, const sigset_t& mask, const sigset_t& defaults,
            int tty_fd, int* error);

}  // namespace joulepipe::monitor

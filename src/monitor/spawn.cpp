#include "spawn.hpp"

#include <spawn.h>
#include <unistd.h>

extern char** environ;

namespace joulepipe::monitor {

pid_t Spawn(const std::vector<std::string>& command, const sigset_t& mask, const sigset_t& defaults,
            int tty_fd, int* error) {
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
  // The child sets the terminal's group itself, before exec, so it never
  // reads the terminal as a background process.
  if (tty_fd >= 0) posix_spawn_file_actions_addtcsetpgrp_np(&actions, tty_fd);
#endif
  pid_t pid = -1;
  *error = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (*error != 0) return -1;
#if !(defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)))
  if (tty_fd >= 0) ::tcsetpgrp(tty_fd, pid);  // older C library: from here, racing exec
#endif
  return pid;
}

}  // namespace joulepipe::monitor

// The daemon's socket file, created without ever naming a path an untrusted
// user can swap.
//
// joulepiped runs as root and its socket's folder may be writable by others
// (a site that puts it outside /run). Binding at the final path and then
// calling chmod()/chown() by path lets such a user replace the path with a
// symlink in between and have root change the mode or group of any file. So
// the socket is bound inside a private folder the daemon creates next to the
// final path (mode 0700, owner checked through its descriptor), its mode and
// group are set there relative to that folder's descriptor (nobody else can
// put a symlink in it), and it is then renamed onto the final path in one
// step (rename() replaces a symlink there, never its target). The private
// folder is removed again. Clients never see the socket before its mode and
// group are final.
#pragma once

#include <sys/types.h>

#include <string>

namespace joulepipe::daemon {

struct BoundSocket {
  int fd = -1;    // the listening socket (non-blocking, close-on-exec)
  dev_t dev = 0;  // the socket file's device and inode, to unlink it later
  ino_t ino = 0;  // only while it is still ours
};

// Binds and listens on `path` with `mode` and, when `group` is not
// (gid_t)-1, that group; `backlog` as for listen(). The path's folder must
// exist. Throws model::InputError naming Config::socket (path, folder) or
// Config::socket_group (cannot give the group) and the fix. Nothing is left
// behind on an error.
BoundSocket BindSocketFile(const std::string& path, mode_t mode, gid_t group, int backlog);

}  // namespace joulepipe::daemon

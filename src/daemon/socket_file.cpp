#include "socket_file.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "joulepipe/model/error.hpp"

namespace joulepipe::daemon {
namespace {

using model::InputError;

std::string Errno(int error) {
  return std::strerror(error);
}

// Closes what it holds on every way out; Release() keeps the socket.
class Undo {
 public:
  ~Undo() {
    if (dir_fd >= 0) {
      ::unlinkat(dir_fd, kName, 0);
      ::close(dir_fd);
    }
    if (parent_fd >= 0) {
      if (!dir_name.empty()) ::unlinkat(parent_fd, dir_name.c_str(), AT_REMOVEDIR);
      ::close(parent_fd);
    }
    if (socket_fd >= 0) ::close(socket_fd);
  }
  static constexpr const char* kName = "s";
  int parent_fd = -1;
  int dir_fd = -1;
  int socket_fd = -1;
  std::string dir_name;  // the private folder's name in parent_fd, once created
};

std::string RandomName() {
  std::random_device device;
  static const char kHex[] = "0123456789abcdef";
  std::string name = ".joulepiped-";
  for (int i = 0; i < 12; ++i) name += kHex[device() % 16];
  return name;
}

}  // namespace

BoundSocket BindSocketFile(const std::string& path, mode_t mode, gid_t group, int backlog) {
  const size_t slash = path.rfind('/');
  const std::string parent =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") {
    throw InputError("Config::socket", "the \"socket\" path " + path +
                                           " names no file; give the socket's file name, "
                                           "e.g. /run/joulepiped/joulepiped.sock");
  }
  Undo undo;
  undo.parent_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (undo.parent_fd < 0) {
    const int error = errno;
    throw InputError("Config::socket",
                     "cannot open the socket's folder " + parent + ": " + Errno(error) +
                         "; check that it exists (systemd: RuntimeDirectory), or choose "
                         "another \"socket\" path");
  }
  // A private folder next to the final path: created 0700 and checked
  // through its own descriptor, so nothing another user swaps in by name is
  // ever used.
  for (int attempt = 0; attempt < 16 && undo.dir_name.empty(); ++attempt) {
    const std::string name = RandomName();
    if (::mkdirat(undo.parent_fd, name.c_str(), 0700) == 0) {
      undo.dir_name = name;
    } else if (errno != EEXIST) {
      const int error = errno;
      throw InputError("Config::socket", "cannot create a folder in " + parent + ": " +
                                             Errno(error) +
                                             "; joulepiped needs to write to the socket's folder "
                                             "(systemd: RuntimeDirectory), or choose another "
                                             "\"socket\" path");
    }
  }
  if (undo.dir_name.empty()) {
    throw InputError("Config::socket", "cannot create a private folder in " + parent +
                                           " (16 names taken); remove the .joulepiped-* "
                                           "folders there");
  }
  undo.dir_fd = ::openat(undo.parent_fd, undo.dir_name.c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat dir{};
  if (undo.dir_fd < 0 || ::fstat(undo.dir_fd, &dir) != 0 || !S_ISDIR(dir.st_mode) ||
      dir.st_uid != ::geteuid() || (dir.st_mode & 077) != 0) {
    if (undo.dir_fd < 0) undo.dir_name.clear();  // not ours to remove
    throw InputError("Config::socket",
                     "the private folder joulepiped created in " + parent +
                         " was replaced while it started; another user can write to " + parent +
                         ": put the socket in a folder only root can write to (e.g. "
                         "/run/joulepiped)");
  }

  undo.socket_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (undo.socket_fd < 0) {
    const int error = errno;
    throw InputError("cannot create a Unix socket: " + Errno(error));
  }
  // Bind through the folder's descriptor (/proc/self/fd/N), so the socket is
  // created in exactly that folder whatever happens to its name; the umask
  // keeps it 0600 until its mode is set.
  const std::string at = "/proc/self/fd/" + std::to_string(undo.dir_fd) + "/" + Undo::kName;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, at.c_str(), at.size() + 1);
  const mode_t old_mask = ::umask(0177);
  const int bound =
      ::bind(undo.socket_fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) {
    throw InputError("Config::socket", "cannot bind a socket in " + parent + ": " +
                                           Errno(bind_errno) +
                                           " (joulepiped binds through /proc/self/fd: is /proc "
                                           "mounted?); or choose another \"socket\" path");
  }
  struct stat file{};
  if (::fstatat(undo.dir_fd, Undo::kName, &file, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISSOCK(file.st_mode)) {
    throw InputError("Config::socket", "the socket bound in " + parent +
                                           " is not where joulepiped put it; choose a "
                                           "\"socket\" path in a folder only root can write to");
  }
  // Relative to the private folder's descriptor: nobody else can put a
  // symlink there, so these change the socket and nothing else.
  if (group != static_cast<gid_t>(-1) &&
      ::fchownat(undo.dir_fd, Undo::kName, static_cast<uid_t>(-1), group, AT_SYMLINK_NOFOLLOW) !=
          0) {
    const int error = errno;
    throw InputError("Config::socket_group", "cannot give " + path +
                                                 " to the \"socket_group\" (gid " +
                                                 std::to_string(group) + "): " + Errno(error));
  }
  if (::fchmodat(undo.dir_fd, Undo::kName, mode, 0) != 0) {
    const int error = errno;
    throw InputError("cannot set the mode of " + path + ": " + Errno(error));
  }
  if (::listen(undo.socket_fd, backlog) != 0) {
    const int error = errno;
    throw InputError("cannot listen on " + path + ": " + Errno(error));
  }
  // One step onto the final name, never over anything there (as bind()
  // itself would refuse): a symlink or file put there since the stale socket
  // was removed is an error, not a target.
  if (::renameat2(undo.dir_fd, Undo::kName, undo.parent_fd, base.c_str(), RENAME_NOREPLACE) != 0) {
    const int error = errno;
    throw InputError("Config::socket",
                     "cannot put the socket at " + path + ": " + Errno(error) +
                         (error == EEXIST ? "; something was created there while joulepiped "
                                            "started: remove it, or choose another \"socket\" path"
                                          : "; choose another \"socket\" path"));
  }
  BoundSocket out;
  out.fd = undo.socket_fd;
  out.dev = file.st_dev;
  out.ino = file.st_ino;
  undo.socket_fd = -1;  // kept; the Undo removes the now empty private folder
  return out;
}

}  // namespace joulepipe::daemon

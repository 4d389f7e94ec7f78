#include "joulepipe/daemon/server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "joulepipe/model/error.hpp"

namespace joulepipe::daemon {
namespace {

using model::InputError;

std::string Errno() {
  return std::strerror(errno);
}

sockaddr_un Address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    throw InputError("Config::socket", "the \"socket\" path " + path + " is longer than " +
                                           std::to_string(sizeof(address.sun_path) - 1) +
                                           " bytes; choose a shorter \"socket\" path");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Removes a stale socket at `path`; throws if a daemon answers there or the
// path is something else.
void RemoveStale(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return;  // nothing there
  if (!S_ISSOCK(info.st_mode)) {
    throw InputError("Config::socket", "the \"socket\" path " + path +
                                           " exists and is not a socket; remove it or choose "
                                           "another \"socket\" path");
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    const sockaddr_un address = Address(path);
    const bool live =
        ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
    ::close(probe);
    if (live) {
      throw InputError("Config::socket", "another joulepiped is already listening on " + path +
                                             "; stop it (`systemctl stop joulepiped`) or choose "
                                             "another \"socket\" path");
    }
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw InputError("Config::socket",
                     "cannot remove the stale socket " + path + ": " + Errno() +
                         "; remove it or choose another \"socket\" path");
  }
}

gid_t GroupOf(const std::string& group) {
  if (!group.empty() && group.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(group));
  }
  std::vector<char> buffer(16384);
  struct group entry {};
  struct group* result = nullptr;
  if (::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &result) != 0 || !result) {
    throw InputError("Config::socket_group",
                     "the \"socket_group\" \"" + group + "\" does not exist; create it "
                         "(`groupadd " + group + "`) or change \"socket_group\"");
  }
  return result->gr_gid;
}

}  // namespace

Server::Server(const Config& config, std::string config_source, Handler* handler)
    : config_(config), config_source_(std::move(config_source)), handler_(handler) {
  const sockaddr_un address = Address(config_.socket);
  RemoveStale(config_.socket);
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw InputError("cannot create a Unix socket: " + Errno());
  // Bind with a restrictive umask so the socket is never briefly more open
  // than configured; then set the exact mode and group.
  const mode_t old_mask = ::umask(0177);
  const int bound =
      ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (bound != 0) {
    const std::string reason = std::strerror(bind_errno);
    ::close(listen_fd_);
    throw InputError("Config::socket",
                     "cannot bind " + config_.socket + ": " + reason +
                         "; check that its directory exists and is writable (systemd: "
                         "RuntimeDirectory), or choose another \"socket\" path");
  }
  struct stat info {};
  if (::stat(config_.socket.c_str(), &info) == 0) {
    socket_dev_ = info.st_dev;
    socket_ino_ = info.st_ino;
  }
  try {
    if (!config_.socket_group.empty() && ::chown(config_.socket.c_str(), static_cast<uid_t>(-1),
                                                 GroupOf(config_.socket_group)) != 0) {
      throw InputError("Config::socket_group", "cannot give " + config_.socket +
                                                   " to the \"socket_group\" " +
                                                   config_.socket_group + ": " + Errno());
    }
    if (::chmod(config_.socket.c_str(), config_.socket_mode) != 0) {
      throw InputError("cannot set the mode of " + config_.socket + ": " + Errno());
    }
    if (::listen(listen_fd_, 64) != 0) {
      throw InputError("cannot listen on " + config_.socket + ": " + Errno());
    }
  } catch (...) {
    ::close(listen_fd_);
    ::unlink(config_.socket.c_str());
    throw;
  }
}

Server::~Server() {
  for (auto& [fd, connection] : connections_) {
    handler_->Close(connection.session, "daemon shutdown");
    ::close(fd);
  }
  connections_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  // Unlink only our own socket: a later daemon may have replaced it.
  struct stat info {};
  if (::lstat(config_.socket.c_str(), &info) == 0 && info.st_dev == socket_dev_ &&
      info.st_ino == socket_ino_) {
    ::unlink(config_.socket.c_str());
  }
}

void Server::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
        std::fprintf(stderr, "joulepiped: accept failed: %s\n", Errno().c_str());
      }
      return;
    }
    Connection connection;
    try {
      connection.peer = PeerOf(fd);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "joulepiped: dropping a client: %s\n", e.what());
      ::close(fd);
      continue;
    }
    if (static_cast<int>(connections_.size()) >= config_.max_clients) {
      connection.output = gpu::EncodeErrorReply(
          "joulepiped serves at most " + std::to_string(config_.max_clients) +
          " clients at once and all are taken; retry later or raise \"max_clients\" in " +
          config_source_);
      connection.close_after_flush = true;
    } else {
      const std::string refusal = Authorise(connection.peer, config_, config_source_);
      if (!refusal.empty()) {
        connection.output = gpu::EncodeErrorReply(refusal);
        connection.close_after_flush = true;
        std::fprintf(stderr, "joulepiped: refused %s: not in allow_users/allow_groups\n",
                     connection.peer.Describe().c_str());
      } else {
        connection.authorised = true;
        connection.session = handler_->Open(connection.peer);
      }
    }
    const bool keep = Flush(fd, connection);
    auto [it, inserted] = connections_.emplace(fd, std::move(connection));
    (void)inserted;
    if (!keep) Drop(fd, "connection closed");
  }
}

bool Server::ReadFrom(int fd, Connection& connection) {
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;                    // EOF or error: the client is gone
    if (connection.close_after_flush) continue;  // discard what a refused client sends
    connection.input.Append(std::string_view(buffer, static_cast<std::size_t>(n)));
    while (auto line = connection.input.Next()) {
      connection.output += handler_->HandleLine(connection.session, *line);
      if (connection.output.size() > config_.max_buffered_bytes) {
        return false;  // it sends requests but does not read the replies
      }
    }
    if (connection.input.overflowed()) {
      connection.output +=
          gpu::EncodeErrorReply("request line longer than " + std::to_string(gpu::kMaxLineBytes) +
                                " bytes; closing the connection");
      connection.close_after_flush = true;
      return true;
    }
    if (static_cast<std::size_t>(n) < sizeof(buffer)) return true;
  }
}

bool Server::Flush(int fd, Connection& connection) {
  while (!connection.output.empty()) {
    const ssize_t n = ::send(fd, connection.output.data(), connection.output.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    connection.output.erase(0, static_cast<std::size_t>(n));
  }
  return !connection.close_after_flush;
}

void Server::Drop(int fd, const std::string& why) {
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  if (it->second.authorised) handler_->Close(it->second.session, why);
  ::close(fd);
  connections_.erase(it);
}

void Server::Run(int stop_fd) {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({stop_fd, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& [fd, connection] : connections_) {
      short events = POLLIN;
      if (!connection.output.empty()) events |= POLLOUT;
      fds.push_back({fd, events, 0});
    }
    const int ready = ::poll(fds.data(), fds.size(), -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "joulepiped: poll failed: %s\n", Errno().c_str());
      break;
    }
    if (fds[0].revents != 0) break;  // stop requested
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      auto it = connections_.find(fd);
      if (it == connections_.end()) continue;
      bool keep = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) keep = ReadFrom(fd, it->second);
      if (keep) keep = Flush(fd, it->second);
      if (!keep) Drop(fd, "connection closed");
    }
    if (fds[1].revents != 0) Accept();
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    const int fd = it->first;
    ++it;
    Drop(fd, "daemon shutdown");
  }
}

}  // namespace joulepipe::daemon

#include "joulepipe/daemon/server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "http_framing.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "socket_file.hpp"
#include "zeusd_api.hpp"

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
  struct stat info{};
  if (::lstat(path.c_str(), &info) != 0) return;  // nothing there
  if (!S_ISSOCK(info.st_mode)) {
    throw InputError("Config::socket", "the \"socket\" path " + path +
                                           " exists and is not a socket; remove it or choose "
                                           "another \"socket\" path");
  }
  // Non-blocking: a live daemon whose accept queue is full makes a blocking
  // connect() wait (a second joulepiped then hung here, deaf to SIGTERM);
  // EAGAIN says someone listens just as well as a connection does.
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe >= 0) {
    const sockaddr_un address = Address(path);
    const bool live =
        ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ||
        errno == EAGAIN || errno == EINPROGRESS;
    ::close(probe);
    if (live) {
      throw InputError("Config::socket", "another joulepiped is already listening on " + path +
                                             "; stop it (`systemctl stop joulepiped`) or choose "
                                             "another \"socket\" path");
    }
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw InputError("Config::socket", "cannot remove the stale socket " + path + ": " + Errno() +
                                           "; remove it or choose another \"socket\" path");
  }
}

gid_t GroupOf(const std::string& group) {
  if (!group.empty() && group.find_first_not_of("0123456789") == std::string::npos) {
    // A gid is 32 bits; a longer number names no group (and must not reach
    // std::stoul, whose out_of_range text would be the message).
    if (group.size() > 10 || std::stoull(group) > 0xFFFFFFFEull) {
      throw InputError("Config::socket_group", "socket group " + group +
                                                   " is not a group id (ids are 0..4294967294); "
                                                   "set \"socket_group\" to a group name or id");
    }
    return static_cast<gid_t>(std::stoul(group));
  }
  std::vector<char> buffer(16384);
  struct group entry{};
  struct group* result = nullptr;
  if (::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &result) != 0 || !result) {
    throw InputError("Config::socket_group", "the \"socket_group\" \"" + group +
                                                 "\" does not exist; create it "
                                                 "(`groupadd " +
                                                 group + "`) or change \"socket_group\"");
  }
  return result->gr_gid;
}

// Whether the client has sent bytes the server has not read yet.
bool HasPendingInput(int fd) {
  char byte;
  return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

// How long past a hello or idle deadline a connection with unread input is
// kept so that input gets read (it may be the hello or a request that came
// just in time). Bounded, so that trickling bytes cannot postpone it forever.
constexpr std::chrono::milliseconds kDeadlineGrace(1000);

std::chrono::steady_clock::duration Duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

// What an expelled client whose process exited is told.
// Reads what `fd` holds now and hands it to `take` chunk by chunk; false at
// EOF or an error (the client is gone), or when `take` says the connection
// is done.
bool ReadAvailable(int fd, const std::function<bool(std::string_view)>& take) {
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    if (!take(std::string_view(buffer, static_cast<std::size_t>(n)))) return false;
    if (static_cast<std::size_t>(n) < sizeof(buffer)) return true;
  }
}

std::string ProcessExitedMessage(pid_t pid) {
  return "the process that opened this connection (pid " + std::to_string(pid) +
         ") has exited; joulepiped restored the GPUs it changed and closes the connection";
}

}  // namespace

std::string Admission(const Peer& peer, const Config& config, const std::string& config_source,
                      std::size_t open, std::size_t open_of_uid) {
  if (open >= static_cast<std::size_t>(config.max_clients)) {
    return "joulepiped serves at most " + std::to_string(config.max_clients) +
           " clients at once and all are taken; retry later or raise \"max_clients\" in " +
           config_source;
  }
  std::string refusal = Authorise(peer, config, config_source);
  if (!refusal.empty()) return refusal;
  if (peer.uid != 0 && open_of_uid >= static_cast<std::size_t>(config.max_clients_per_uid)) {
    return "uid " + std::to_string(peer.uid) + " (" + peer.user + ") already has " +
           std::to_string(open_of_uid) +
           " connections to joulepiped, the most one user may hold at once "
           "(\"max_clients_per_uid\" in " +
           config_source +
           "); close some (each ClockControl holds one), or have the administrator raise it";
  }
  return "";
}

Server::Server(const Config& config, std::string config_source, Handler* handler)
    : config_(config), config_source_(std::move(config_source)), handler_(handler) {
  CheckAllowList(config_, config_source_);  // names that must exist, at start
  Address(config_.socket);                  // clients connect by this path: it must fit sun_path
  RemoveStale(config_.socket);
  // Bound in a private folder and renamed into place (socket_file.hpp): no
  // mode or group is ever set through a path another user could swap.
  const gid_t group =
      config_.socket_group.empty() ? static_cast<gid_t>(-1) : GroupOf(config_.socket_group);
  const BoundSocket bound = BindSocketFile(config_.socket, config_.socket_mode, group, 64);
  listen_fd_ = bound.fd;
  socket_dev_ = bound.dev;
  socket_ino_ = bound.ino;
  if (!config_.zeusd_socket.empty()) {
    try {
      if (config_.zeusd_socket == config_.socket) {
        throw model::InputError("Config::zeusd_socket",
                                "zeusd_socket must be another path than socket (" + config_.socket +
                                    "): each socket speaks one protocol");
      }
      Address(config_.zeusd_socket);
      RemoveStale(config_.zeusd_socket);
      const BoundSocket zeusd =
          BindSocketFile(config_.zeusd_socket, config_.socket_mode, group, 64);
      zeusd_fd_ = zeusd.fd;
      zeusd_dev_ = zeusd.dev;
      zeusd_ino_ = zeusd.ino;
    } catch (const model::InputError& e) {
      ::close(listen_fd_);
      ::unlink(config_.socket.c_str());
      // The same checks as the main socket's, about the other field.
      throw model::InputError(e.field() == "Config::socket" ? "Config::zeusd_socket" : e.field(),
                              e.what());
    }
  }
}

Server::~Server() {
  for (auto& [fd, connection] : connections_) {
    if (connection.authorised && (!connection.http || connection.own_session)) {
      handler_->Close(connection.session, "daemon shutdown");
    }
    ::close(fd);
  }
  connections_.clear();
  for (auto& [pid, process] : zeus_processes_) handler_->Close(process.session, "daemon shutdown");
  zeus_processes_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (zeusd_fd_ >= 0) ::close(zeusd_fd_);
  // Unlink only our own sockets: a later daemon may have replaced them.
  struct stat info{};
  if (::lstat(config_.socket.c_str(), &info) == 0 && info.st_dev == socket_dev_ &&
      info.st_ino == socket_ino_) {
    ::unlink(config_.socket.c_str());
  }
  if (zeusd_fd_ >= 0 && ::lstat(config_.zeusd_socket.c_str(), &info) == 0 &&
      info.st_dev == zeusd_dev_ && info.st_ino == zeusd_ino_) {
    ::unlink(config_.zeusd_socket.c_str());
  }
}

std::string Server::Seconds(double seconds) const {
  return model::Format("%g s", seconds);
}

void Server::Accept(int listen_fd, bool http, Clock::time_point now) {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays queued and the socket readable: stop polling
        // it for a moment rather than spin until a descriptor frees up.
        if (accept_paused_until_ == Clock::time_point{}) {
          std::fprintf(stderr, "joulepiped: accept failed: %s; pausing new connections\n",
                       Errno().c_str());
        }
        accept_paused_until_ = now + std::chrono::milliseconds(100);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
        std::fprintf(stderr, "joulepiped: accept failed: %s\n", Errno().c_str());
      }
      return;
    }
    accept_paused_until_ = Clock::time_point{};
    Connection connection;
    connection.opened = now;
    connection.last_request = now;
    connection.http = http;
    try {
      connection.peer = PeerOf(fd);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "joulepiped: dropping a client: %s\n", e.what());
      ::close(fd);
      continue;
    }
    std::size_t of_uid = 0;
    for (const auto& [other_fd, other] : connections_) {
      if (other.peer.uid == connection.peer.uid) ++of_uid;
    }
    const std::string refusal =
        Admission(connection.peer, config_, config_source_, connections_.size(), of_uid);
    if (!refusal.empty()) {
      connection.output =
          http ? HttpAnswer(403, "application/json",
                            nlohmann::json{{"error", refusal}}.dump(
                                -1, ' ', false, nlohmann::json::error_handler_t::replace),
                            true)
               : gpu::EncodeErrorReply(refusal);
      connection.close_after_flush = true;
      // Logged at most once a second: a flood of refused connections must
      // not flood the journal.
      ++refusals_unlogged_;
      if (now - last_refusal_log_ >= std::chrono::seconds(1)) {
        std::fprintf(stderr, "joulepiped: refused %s: %s", connection.peer.Describe().c_str(),
                     refusal.c_str());
        if (refusals_unlogged_ > 1) {
          std::fprintf(stderr, " (and %llu earlier refusals not logged)",
                       static_cast<unsigned long long>(refusals_unlogged_ - 1));
        }
        std::fputc('\n', stderr);
        last_refusal_log_ = now;
        refusals_unlogged_ = 0;
      }
    } else if (http) {
      connection.authorised = true;
      if (connection.peer.pid > 0) {
        connection.session = ZeusSessionFor(fd, connection.peer);
      } else {
        connection.session = handler_->OpenShared(connection.peer);
        connection.own_session = true;
      }
    } else {
      connection.authorised = true;
      connection.session = handler_->Open(connection.peer);
      connection.process = ProcessWatch::OfPeer(fd, connection.peer.pid);
    }
    const bool keep = Flush(fd, connection);
    const bool exited = connection.authorised && !http && connection.process.Exited();
    connections_.emplace(fd, std::move(connection));
    if (!keep) {
      Drop(fd, "connection closed");
    } else if (exited) {
      Expel(fd, "process_exited",
            "the process that opened this connection has already exited; closing it",
            "client process exited");
    }
  }
}

bool Server::ReadFrom(int fd, Connection& connection) {
  return ReadAvailable(fd, [&](std::string_view bytes) {
    if (connection.close_after_flush) return true;  // discard what a refused client sends
    connection.input.Append(bytes);
    bool requested = false;
    while (auto line = connection.input.Next()) {
      requested = true;
      connection.output += handler_->HandleLine(connection.session, *line);
      if (connection.output.size() > config_.max_buffered_bytes) {
        return false;  // it sends requests but does not read the replies
      }
    }
    if (requested) connection.last_request = Clock::now();
    if (connection.input.overflowed()) {
      connection.output +=
          gpu::EncodeErrorReply("request line longer than " + std::to_string(gpu::kMaxLineBytes) +
                                " bytes; closing the connection");
      connection.close_after_flush = true;
    }
    return true;
  });
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

void Server::Release(Connection& connection, const std::string& why) {
  if (!connection.authorised) return;
  connection.authorised = false;
  if (!connection.http || connection.own_session) {
    handler_->Close(connection.session, why);
    return;
  }
  const auto it = zeus_processes_.find(connection.peer.pid);
  if (it == zeus_processes_.end() || it->second.session != connection.session) return;
  ZeusProcess& process = it->second;
  if (--process.connections <= 0 && !handler_->holds_lease(process.session)) {
    handler_->Close(process.session, why);  // nothing to restore: it holds no claim
    zeus_processes_.erase(it);
  }
}

void Server::Drop(int fd, const std::string& why) {
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Release(it->second, why);
  ::close(fd);
  connections_.erase(it);
}

void Server::Expel(int fd, const std::string& reason, const std::string& message,
                   const std::string& why) {
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& connection = it->second;
  // Restore first: the GPUs must not wait on a client that does not read.
  Release(connection, why);
  if (!connection.http) {
    connection.output += gpu::EncodeReply({{"ok", false}, {"error", message}, {"closed", reason}});
  }
  connection.close_after_flush = true;
  Flush(fd, connection);  // one non-blocking attempt; what does not fit is lost
  ::close(fd);
  connections_.erase(it);
}

Server::Clock::time_point Server::CheckDeadlines(Clock::time_point now) {
  Clock::time_point next = Clock::time_point::max();
  const bool poll_processes = now >= next_process_poll_;
  bool any_polled = false;
  struct Expulsion {
    int fd;
    const char* reason;
    std::string message;
    const char* why;
  };
  std::vector<Expulsion> expel;
  for (auto& [fd, connection] : connections_) {
    // Whether `deadline` has passed (past the grace while input is unread);
    // if not, `next` is lowered to when it will.
    const auto expired = [&, fd = fd](Clock::time_point deadline) {
      if (now >= deadline && (now >= deadline + kDeadlineGrace || !HasPendingInput(fd))) {
        return true;
      }
      next = std::min(next, now >= deadline ? deadline + kDeadlineGrace : deadline);
      return false;
    };
    if (connection.http && connection.authorised) {
      if (connection.streaming) {
        if (now >= connection.next_event) {
          connection.output += ZeusdPowerEvent(*handler_, connection.stream_gpus);
          connection.next_event = now + Duration(kPowerStreamPeriodS);
          if (connection.output.size() > config_.max_buffered_bytes) {
            expel.push_back({fd, "", "", "power stream not read"});
            continue;
          }
        }
        next = std::min(next, connection.next_event);
        continue;
      }
      const bool asked = connection.last_request != connection.opened;
      const double limit_s = asked ? config_.idle_timeout_s : config_.hello_timeout_s;
      if (expired(connection.last_request + Duration(limit_s))) {
        expel.push_back({fd, "", "", asked ? "idle timeout" : "request timeout"});
      }
      continue;
    }
    if (!connection.authorised || !handler_->greeted(connection.session)) {
      if (expired(connection.opened + Duration(config_.hello_timeout_s))) {
        expel.push_back({fd, "hello_timeout",
                         "no hello within " + Seconds(config_.hello_timeout_s) +
                             " of connecting; send {\"op\":\"hello\",\"version\":" +
                             std::to_string(gpu::kDaemonProtocolVersion) +
                             "} first. Closing the connection",
                         "hello timeout"});
        continue;
      }
    } else if (!handler_->holds_lease(connection.session)) {
      if (expired(connection.last_request + Duration(config_.idle_timeout_s))) {
        expel.push_back(
            {fd, "idle_timeout",
             "no request for " + Seconds(config_.idle_timeout_s) +
                 " and no GPU leased; closing the connection (connect again when needed)",
             "idle timeout"});
        continue;
      }
    }
    const ProcessWatch& process = connection.process;
    if (connection.authorised && process.fd() < 0 &&
        process.method() != ProcessWatch::Method::kNone) {
      any_polled = true;
      if (poll_processes && process.Exited()) {
        expel.push_back({fd, "process_exited", ProcessExitedMessage(connection.peer.pid),
                         "client process exited"});
      }
    }
  }
  std::vector<pid_t> exited;
  for (const auto& [pid, process] : zeus_processes_) {
    if (process.watch.fd() >= 0 || process.watch.method() == ProcessWatch::Method::kNone) continue;
    any_polled = true;
    if (poll_processes && process.watch.Exited()) exited.push_back(pid);
  }
  if (poll_processes) next_process_poll_ = now + Duration(kProcessPollIntervalS);
  if (any_polled) next = std::min(next, next_process_poll_);
  if (accept_paused_until_ > now) next = std::min(next, accept_paused_until_);
  for (const Expulsion& e : expel) Expel(e.fd, e.reason, e.message, e.why);
  for (pid_t pid : exited) EndZeusProcess(pid, "client process exited");
  return next;
}

void Server::Run(int stop_fd) {
  std::vector<pollfd> fds;
  std::vector<int> owners;  // for fds[i], i >= 2: the connection's socket
  for (;;) {
    const Clock::time_point now = Clock::now();
    const Clock::time_point next = CheckDeadlines(now);
    int timeout_ms = -1;
    if (next != Clock::time_point::max()) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, INT_MAX));
    }
    fds.clear();
    owners.clear();
    fds.push_back({stop_fd, POLLIN, 0});
    fds.push_back({now >= accept_paused_until_ ? listen_fd_ : -1, POLLIN, 0});
    fds.push_back({now >= accept_paused_until_ ? zeusd_fd_ : -1, POLLIN, 0});
    // Sockets before process watches: a client that dies holding the only
    // copy of its socket is seen as EOF ("connection closed"), which the
    // kernel delivers before the process counts as exited.
    for (const auto& [fd, connection] : connections_) {
      short events = POLLIN;
      if (!connection.output.empty()) events |= POLLOUT;
      fds.push_back({fd, events, 0});
      owners.push_back(fd);
    }
    const std::size_t first_watch = fds.size();
    for (const auto& [fd, connection] : connections_) {
      if (connection.authorised && connection.process.fd() >= 0) {
        fds.push_back({connection.process.fd(), POLLIN, 0});
        owners.push_back(fd);
      }
    }
    const std::size_t first_zeus = fds.size();
    std::vector<pid_t> zeus_pids;  // for fds[i], i >= first_zeus
    for (const auto& [pid, process] : zeus_processes_) {
      if (process.watch.fd() >= 0) {
        fds.push_back({process.watch.fd(), POLLIN, 0});
        zeus_pids.push_back(pid);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "joulepiped: poll failed: %s\n", Errno().c_str());
      break;
    }
    if (fds[0].revents != 0) break;  // stop requested
    for (std::size_t i = 3; i < first_watch; ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      auto it = connections_.find(fd);
      if (it == connections_.end()) continue;
      bool keep = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        keep = it->second.http ? ReadHttp(fd, it->second) : ReadFrom(fd, it->second);
      }
      if (keep) keep = Flush(fd, it->second);
      if (!keep) Drop(fd, "connection closed");
    }
    for (std::size_t i = first_watch; i < first_zeus; ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = owners[i - 3];
      const auto it = connections_.find(fd);
      if (it == connections_.end() || it->second.process.fd() != fds[i].fd) continue;
      Expel(fd, "process_exited", ProcessExitedMessage(it->second.peer.pid),
            "client process exited");
    }
    for (std::size_t i = first_zeus; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const pid_t pid = zeus_pids[i - first_zeus];
      const auto it = zeus_processes_.find(pid);
      if (it == zeus_processes_.end() || it->second.watch.fd() != fds[i].fd) continue;
      EndZeusProcess(pid, "client process exited");
    }
    if (fds[1].revents != 0) Accept(listen_fd_, false, Clock::now());
    if (fds[2].revents != 0) Accept(zeusd_fd_, true, Clock::now());
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    const int fd = it->first;
    ++it;
    Drop(fd, "daemon shutdown");
  }
  while (!zeus_processes_.empty())
    EndZeusProcess(zeus_processes_.begin()->first, "daemon shutdown");
}

// ---- The zeusd face ---------------------------------------------------------

SessionId Server::ZeusSessionFor(int fd, const Peer& peer) {
  auto it = zeus_processes_.find(peer.pid);
  if (it != zeus_processes_.end() && it->second.watch.Exited()) {
    // The pid's earlier process is gone (its exit not yet seen): end it
    // before a new process of that pid starts afresh.
    EndZeusProcess(peer.pid, "client process exited");
    it = zeus_processes_.end();
  }
  if (it == zeus_processes_.end()) {
    ZeusProcess process;
    process.peer = peer;
    process.session = handler_->OpenShared(peer);
    process.watch = ProcessWatch::OfPeer(fd, peer.pid);
    it = zeus_processes_.emplace(peer.pid, std::move(process)).first;
  }
  ++it->second.connections;
  return it->second.session;
}

void Server::EndZeusProcess(pid_t pid, const std::string& why) {
  const auto it = zeus_processes_.find(pid);
  if (it == zeus_processes_.end()) return;
  const SessionId session = it->second.session;
  const bool held = handler_->holds_lease(session);
  handler_->Close(session, why);  // withdraws its claims (audited, with the pid)
  if (held) {
    std::fprintf(stderr, "joulepiped: Zeus client %s: %s; its GPU settings were withdrawn\n",
                 it->second.peer.Describe().c_str(), why.c_str());
  }
  zeus_processes_.erase(it);
  std::vector<int> fds;
  for (auto& [fd, connection] : connections_) {
    if (connection.http && !connection.own_session && connection.session == session) {
      connection.authorised = false;  // its session is gone already
      fds.push_back(fd);
    }
  }
  for (int fd : fds) Drop(fd, why);
}

bool Server::ReadHttp(int fd, Connection& connection) {
  return ReadAvailable(fd, [&](std::string_view bytes) {
    // A refused client, or a stream's (it sends nothing more): discarded.
    if (connection.close_after_flush || connection.streaming) return true;
    connection.http_input.append(bytes);
    for (;;) {
      const HttpCut cut = CutRequest(&connection.http_input);
      if (cut.refusal) {
        connection.output +=
            HttpAnswer(cut.refusal->status, "application/json",
                       nlohmann::json{{"error", cut.refusal->message}}.dump(), true);
        connection.close_after_flush = true;
        connection.http_input.clear();
        return true;
      }
      if (!cut.request) return true;
      const Clock::time_point now = Clock::now();
      connection.last_request = now == connection.opened ? now + Clock::duration(1) : now;
      const ZeusdAnswer answer = AnswerZeusd(*handler_, connection.session, *cut.request);
      if (answer.stream) {
        connection.output += HttpEventStreamHead();
        connection.streaming = true;
        connection.stream_gpus = answer.stream_gpus;
        connection.next_event = now;
        connection.http_input.clear();
        return true;
      }
      connection.output +=
          HttpAnswer(answer.status, "application/json", answer.body, !cut.request->keep_alive);
      if (!cut.request->keep_alive) {
        connection.close_after_flush = true;
        connection.http_input.clear();
        return true;
      }
      if (connection.output.size() > config_.max_buffered_bytes) return false;
    }
  });
}

}  // namespace joulepipe::daemon

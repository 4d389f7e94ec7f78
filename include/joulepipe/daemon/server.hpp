// joulepiped's socket server: one thread, poll() over non-blocking sockets.
//
// Why one thread: every request is a few NVML calls (tens of microseconds),
// so a single thread keeps up with any realistic number of clients, and it
// makes the leases race-free without locks — two clients can never change
// one GPU at once. Non-blocking sockets with bounded buffers and deadlines
// keep one slow or hostile client from stalling or locking out the others:
//   * at most max_clients connections, and at most max_clients_per_uid of
//     one uid other than root (Admission); one more is answered with an
//     error and closed;
//   * a connection that has not said hello within hello_timeout_s gets an
//     error line and is closed (silent connections cannot hold the slots);
//   * a greeted client that holds no lease and sends no request for
//     idle_timeout_s gets an error line and is closed. A client holding a
//     lease is never closed for idleness; the process watch below ends it;
//   * a request line longer than kMaxLineBytes gets an error reply, then the
//     connection is closed (the stream cannot be re-framed);
//   * a client that does not read its replies is closed once more than
//     max_buffered_bytes of replies are waiting;
//   * replies are sent with MSG_NOSIGNAL, so a vanished peer is an error,
//     never SIGPIPE;
//   * when accept() runs out of file descriptors, accepting pauses briefly
//     instead of spinning.
// The lines the server sends on its own before closing (timeouts, the
// client's process exited) are error replies with a "closed" field naming
// the reason ("hello_timeout", "idle_timeout", "process_exited"), so a
// client can tell them from the reply to a request it just sent.
//
// Every connection ends in Handler::Close, which restores the GPUs it
// changed: EOF, a read/write error, a limit or timeout, and the exit of the
// process that connected (ProcessWatch, peer.hpp: a pidfd in the poll set,
// or polled every kProcessPollIntervalS) — even while a forked child of it
// keeps the socket open. The connection is then closed too.
//
// The zeusd face (Config::zeusd_socket, zeusd_api.hpp): a second socket,
// admitted by the same rules, speaking HTTP/1.1. Its sessions are per
// caller process, not per connection: Zeus opens connections as it likes,
// and a setting must outlive them. The daemon watches each caller process
// (the same ProcessWatch) and, when it exits, withdraws its claims
// (Handler: the newest live claim or the default comes back); a process
// session with no connection and no claim left is dropped at once. A
// caller whose pid the daemon cannot see gets a session per connection.
// An HTTP connection that sends no request for idle_timeout_s (the first
// within hello_timeout_s) is closed; a power stream is never idle, and is
// closed like any client once max_buffered_bytes of events wait unread.
//
// The socket file: a stale one (nothing listening) is removed at start; one
// with a live daemon behind it, or a path that is not a socket, is an error.
// It is created with the configured mode and group without ever naming a path
// another user could swap (bound in a private folder, then renamed into
// place: src/daemon/socket_file.hpp) and unlinked when the Server is
// destroyed (if it is still ours).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "joulepipe/daemon/config.hpp"
#include "joulepipe/daemon/handler.hpp"
#include "joulepipe/daemon/peer.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"

namespace joulepipe::daemon {

// Why a new connection from `peer` is refused, or "" to serve it, given the
// connections open now (`open`) and those of the peer's uid
// (`open_of_uid`), in this order: max_clients; authorisation (Authorise);
// max_clients_per_uid, which root (uid 0) is exempt from — root can stop
// the daemon anyway, and jobs run as root in containers may have many
// ranks. Messages name the configuration key and `config_source`.
std::string Admission(const Peer& peer, const Config& config, const std::string& config_source,
                      std::size_t open, std::size_t open_of_uid);

class Server {
 public:
  // Creates and binds the socket. Throws model::InputError naming the path
  // and the fix (directory missing, another daemon running, unknown group),
  // with field() the Config field to change ("Config::socket",
  // "Config::socket_group"); messages call it by its configuration key.
  Server(const Config& config, std::string config_source, Handler* handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Serves until `stop_fd` (a signalfd or a pipe) becomes readable, then
  // closes every connection (restoring their GPUs) and returns.
  void Run(int stop_fd);

 private:
  using Clock = std::chrono::steady_clock;

  struct Connection {
    SessionId session = 0;
    Peer peer;
    ProcessWatch process;            // the process that connected
    Clock::time_point opened;        // hello deadline: opened + hello_timeout_s
    Clock::time_point last_request;  // idle deadline: last_request + idle_timeout_s
    gpu::LineBuffer input;
    std::string output;
    bool close_after_flush = false;  // refused or broken: say why, then close
    bool authorised = false;
    // The zeusd face: HTTP requests; a session of the caller's process
    // (own_session: this connection's alone, the pid unknown).
    bool http = false;
    bool own_session = false;
    std::string http_input;
    bool streaming = false;  // GET /gpu/stream_power: events until it closes
    std::vector<unsigned> stream_gpus;
    Clock::time_point next_event;
  };
  // A Zeus caller process: its claims last as long as it does.
  struct ZeusProcess {
    SessionId session = 0;
    Peer peer;
    ProcessWatch watch;
    int connections = 0;
  };

  void Accept(int listen_fd, bool http, Clock::time_point now);
  // false: the connection is done and must be dropped.
  bool ReadFrom(int fd, Connection& connection);
  bool ReadHttp(int fd, Connection& connection);
  // The session of `peer`'s process, opened (and its process watched) on
  // its first connection.
  SessionId ZeusSessionFor(int fd, const Peer& peer);
  // The connection no longer uses its session: a native one is closed
  // (restoring its GPUs); a Zeus process's is closed once it has neither
  // connections nor claims.
  void Release(Connection& connection, const std::string& why);
  // The Zeus process exited (or the daemon stops): its claims are
  // withdrawn and its connections closed.
  void EndZeusProcess(pid_t pid, const std::string& why);
  bool Flush(int fd, Connection& connection);
  void Drop(int fd, const std::string& why);
  // Ends the connection on the daemon's initiative: restores its GPUs, sends
  // `message` as an error line with "closed": `reason` (best effort, never
  // blocking) and closes it.
  void Expel(int fd, const std::string& reason, const std::string& message, const std::string& why);
  // Expels the connections past their hello or idle deadline and those whose
  // polled process watch says exited; returns the earliest next deadline
  // (Clock::time_point::max() if none).
  Clock::time_point CheckDeadlines(Clock::time_point now);
  std::string Seconds(double seconds) const;

  Config config_;
  std::string config_source_;
  Handler* handler_;
  int listen_fd_ = -1;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  int zeusd_fd_ = -1;  // Config::zeusd_socket's, -1 without one
  dev_t zeusd_dev_ = 0;
  ino_t zeusd_ino_ = 0;
  std::map<int, Connection> connections_;
  std::map<pid_t, ZeusProcess> zeus_processes_;
  Clock::time_point accept_paused_until_{};  // after EMFILE/ENFILE
  Clock::time_point next_process_poll_{};
  Clock::time_point last_refusal_log_{};
  std::uint64_t refusals_unlogged_ = 0;
};

}  // namespace joulepipe::daemon

// joulepiped's socket server: one thread, poll() over non-blocking sockets.
//
// Why one thread: every request is a few NVML calls (tens of microseconds),
// so a single thread keeps up with any realistic number of clients, and it
// makes the leases race-free without locks — two clients can never change
// one GPU at once. Non-blocking sockets with bounded buffers keep one slow or
// hostile client from stalling the others:
//   * at most max_clients connections; one more is answered with an error
//     and closed;
//   * a request line longer than kMaxLineBytes gets an error reply, then the
//     connection is closed (the stream cannot be re-framed);
//   * a client that does not read its replies is closed once more than
//     max_buffered_bytes of replies are waiting;
//   * replies are sent with MSG_NOSIGNAL, so a vanished peer is an error,
//     never SIGPIPE.
// Every connection ends in Handler::Close, which restores the GPUs it
// changed: EOF, a read/write error, a peer killed with SIGKILL (the kernel
// closes its socket), a limit exceeded.
//
// The socket file: a stale one (nothing listening) is removed at start; one
// with a live daemon behind it, or a path that is not a socket, is an error.
// It is created with the configured mode and group and unlinked when the
// Server is destroyed (if it is still ours).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "joulepipe/daemon/config.hpp"
#include "joulepipe/daemon/handler.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"

namespace joulepipe::daemon {

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
  struct Connection {
    SessionId session = 0;
    Peer peer;
    gpu::LineBuffer input;
    std::string output;
    bool close_after_flush = false;  // refused or broken: say why, then close
    bool authorised = false;
  };

  void Accept();
  // false: the connection is done and must be dropped.
  bool ReadFrom(int fd, Connection& connection);
  bool Flush(int fd, Connection& connection);
  void Drop(int fd, const std::string& why);

  Config config_;
  std::string config_source_;
  Handler* handler_;
  int listen_fd_ = -1;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  std::map<int, Connection> connections_;
};

}  // namespace joulepipe::daemon

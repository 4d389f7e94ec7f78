// Who is on the other end of a Unix socket, and whether joulepiped serves it.
//
// Identity comes from the kernel (SO_PEERCRED: pid, uid, gid at connect
// time), never from what the client says. Authorisation, in order:
//   1. uid 0 (root) is always allowed;
//   2. the uid, or the name of its user, is in allow_users;
//   3. any group of the peer is in allow_groups: the gid from SO_PEERCRED
//      and every group of the uid's user (primary and supplementary, from
//      getgrouplist), by gid or name.
// Names are resolved at each check, so accounts created later count.
#pragma once

#include <sys/types.h>

#include <string>

#include "joulepipe/daemon/config.hpp"

namespace joulepipe::daemon {

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;  // name of uid, or the uid in decimal if it has none
  // "pid 4242 uid 1000 (alice)": how messages and the audit log name it.
  std::string Describe() const;
};

// The peer of connected Unix socket `fd` (SO_PEERCRED). Throws
// std::system_error if the kernel cannot tell.
Peer PeerOf(int fd);

// A peer with these credentials (tests, the fuzz target).
Peer MakePeer(pid_t pid, uid_t uid, gid_t gid);

// Every name of allow_users and allow_groups exists on this machine (a uid
// or gid given as a number needs none). Throws model::InputError
// ("Config::allow_users" / "Config::allow_groups") naming the first that does
// not, so a misspelt name stops joulepiped at start instead of silently
// allowing nobody. Server's constructor calls it.
void CheckAllowList(const Config& config, const std::string& config_source);

// "" when `peer` may use the daemon; else the reason, naming the uid and the
// configuration to change (allow_users / allow_groups in `config_source`).
std::string Authorise(const Peer& peer, const Config& config, const std::string& config_source);

// Watches the process that opened a connection, so that its leases end when
// it exits even while a forked child (a data-loader worker) still holds the
// inherited socket and keeps it open. Methods, best first:
//   * kPidfd: a pidfd, which poll() reports readable once the process has
//     exited. From the socket itself (SO_PEERPIDFD, Linux 6.5+: the kernel's
//     reference to the process that called connect(), immune to pid reuse),
//     else pidfd_open(pid) (Linux 5.3+; a pid recycled between connect() and
//     this call would be watched instead: the socket's own EOF still ends a
//     session whose client was the only holder);
//   * kProc, when the kernel has no pidfds (ENOSYS) or a system-call filter
//     refuses them: Exited() reads /proc/<pid>/stat; gone, a zombie, or
//     another start time than at the start of the watch (the pid reused) all
//     count as exited. The caller polls it (the server: every
//     kProcessPollInterval);
//   * kKill, without /proc: Exited() is kill(pid, 0) failing with ESRCH
//     (a zombie or a reused pid counts as alive);
//   * kNone: no pid to watch (SO_PEERCRED said 0, a peer in a pid namespace
//     the daemon cannot see); only the socket ends the session.
class ProcessWatch {
 public:
  enum class Method { kNone, kPidfd, kProc, kKill };

  ProcessWatch() = default;  // kNone
  // The process at the other end of connected Unix socket `socket_fd`, whose
  // pid (SO_PEERCRED) is `pid`. `allow_pidfd` false skips the pidfd methods
  // (tests of the fallback).
  static ProcessWatch OfPeer(int socket_fd, pid_t pid, bool allow_pidfd = true);
  // Process `pid`.
  static ProcessWatch OfProcess(pid_t pid, bool allow_pidfd = true);

  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  Method method() const { return method_; }
  // "pidfd", "/proc polling", "kill(0) polling", "none".
  const char* method_name() const;
  // The pidfd to poll for POLLIN (readable = exited), or -1 when Exited()
  // must be polled instead (or there is nothing to watch).
  int fd() const { return method_ == Method::kPidfd ? pidfd_ : -1; }
  // Whether the process has exited; never blocks. Also true when it had
  // exited before the watch began.
  bool Exited() const;

 private:
  // Fills in a kProc or kKill watch of `pid`.
  void StartPolling(pid_t pid);

  Method method_ = Method::kNone;
  pid_t pid_ = 0;
  int pidfd_ = -1;
  unsigned long long start_time_ = 0;  // kProc: field 22 of /proc/<pid>/stat
  bool exited_at_start_ = false;
};

// How often the server polls kProc and kKill watches.
inline constexpr double kProcessPollIntervalS = 0.2;

}  // namespace joulepipe::daemon

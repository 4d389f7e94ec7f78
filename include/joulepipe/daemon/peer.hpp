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

// "" when `peer` may use the daemon; else the reason, naming the uid and the
// configuration to change (allow_users / allow_groups in `config_source`).
std::string Authorise(const Peer& peer, const Config& config, const std::string& config_source);

}  // namespace joulepipe::daemon

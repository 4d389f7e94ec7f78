#include "joulepipe/daemon/peer.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>
#include <vector>

namespace joulepipe::daemon {
namespace {

bool IsNumber(const std::string& text) {
  return !text.empty() && text.size() < 11 &&
         text.find_first_not_of("0123456789") == std::string::npos;
}

// The user's name and primary gid via getpwuid_r; false if there is none.
bool LookupUser(uid_t uid, std::string* name, gid_t* primary) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* result = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &result) != 0 || !result) {
    return false;
  }
  *name = result->pw_name;
  *primary = result->pw_gid;
  return true;
}

bool UserMatches(const std::string& allowed, const Peer& peer) {
  if (IsNumber(allowed)) return std::stoul(allowed) == peer.uid;
  return allowed == peer.user;
}

// gid of a group name or number; false if no such group.
bool GroupId(const std::string& group, gid_t* gid) {
  if (IsNumber(group)) {
    *gid = static_cast<gid_t>(std::stoul(group));
    return true;
  }
  std::vector<char> buffer(16384);
  struct group entry {};
  struct group* result = nullptr;
  if (::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &result) != 0 || !result) {
    return false;
  }
  *gid = result->gr_gid;
  return true;
}

std::vector<gid_t> GroupsOf(const Peer& peer) {
  std::vector<gid_t> groups = {peer.gid};
  std::string name;
  gid_t primary = 0;
  if (!LookupUser(peer.uid, &name, &primary)) return groups;
  int count = 64;
  std::vector<gid_t> list(count);
  if (::getgrouplist(name.c_str(), primary, list.data(), &count) < 0) {
    list.resize(count);
    if (::getgrouplist(name.c_str(), primary, list.data(), &count) < 0) count = 0;
  }
  list.resize(count);
  groups.insert(groups.end(), list.begin(), list.end());
  return groups;
}

}  // namespace

std::string Peer::Describe() const {
  return "pid " + std::to_string(pid) + " uid " + std::to_string(uid) + " (" + user + ")";
}

Peer MakePeer(pid_t pid, uid_t uid, gid_t gid) {
  Peer peer;
  peer.pid = pid;
  peer.uid = uid;
  peer.gid = gid;
  gid_t primary = 0;
  if (!LookupUser(uid, &peer.user, &primary)) peer.user = std::to_string(uid);
  return peer;
}

Peer PeerOf(int fd) {
  ucred credentials{};
  socklen_t size = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockopt(SO_PEERCRED)");
  }
  return MakePeer(credentials.pid, credentials.uid, credentials.gid);
}

std::string Authorise(const Peer& peer, const Config& config, const std::string& config_source) {
  if (peer.uid == 0) return "";
  for (const std::string& allowed : config.allow_users) {
    if (UserMatches(allowed, peer)) return "";
  }
  if (!config.allow_groups.empty()) {
    const std::vector<gid_t> groups = GroupsOf(peer);
    for (const std::string& allowed : config.allow_groups) {
      gid_t gid = 0;
      if (!GroupId(allowed, &gid)) continue;
      for (gid_t g : groups) {
        if (g == gid) return "";
      }
    }
  }
  return "uid " + std::to_string(peer.uid) + " (" + peer.user +
         ") is not allowed to use joulepiped: add the user to \"allow_users\" or one of its "
         "groups to \"allow_groups\" in " +
         config_source + " and restart joulepiped";
}

}  // namespace joulepipe::daemon

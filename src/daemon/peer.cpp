#include "joulepipe/daemon/peer.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"

// SO_PEERPIDFD (Linux 6.5) where the C library's headers predate it; the
// value is asm-generic's, shared by these architectures.
#if !defined(SO_PEERPIDFD) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || \
                               defined(__arm__) || defined(__riscv))
#define SO_PEERPIDFD 77
#endif
// pidfd_open (Linux 5.3); glibc before 2.36 has no wrapper.
#if !defined(SYS_pidfd_open) && defined(__NR_pidfd_open)
#define SYS_pidfd_open __NR_pidfd_open
#endif

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
    const unsigned long long id = std::stoull(group);  // < 11 digits: cannot overflow
    if (id > 0xFFFFFFFEull) return false;              // not a gid: no such group
    *gid = static_cast<gid_t>(id);
    return true;
  }
  std::vector<char> buffer(16384);
  struct group entry{};
  struct group* result = nullptr;
  if (::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &result) != 0 || !result) {
    return false;
  }
  *gid = result->gr_gid;
  return true;
}

// State (field 3) and start time (field 22) from /proc/<pid>/stat. The
// command name (field 2) is in parentheses and may hold anything, so fields
// are counted after its last ')'. Returns -1 if the file cannot be opened
// (errno tells why), 0 if it cannot be parsed, 1 on success.
int ReadProcStat(pid_t pid, char* state, unsigned long long* start_time) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[1024];
  ssize_t size = 0;
  for (;;) {
    size = ::read(fd, text, sizeof(text) - 1);
    if (size < 0 && errno == EINTR) continue;
    break;
  }
  const int saved_errno = errno;
  ::close(fd);
  if (size < 0) {
    errno = saved_errno == ESRCH ? ENOENT : saved_errno;  // exited between open and read
    return -1;
  }
  text[size] = '\0';
  const char* fields = std::strrchr(text, ')');
  if (!fields || fields[1] != ' ') return 0;
  fields += 2;  // field 3
  *state = fields[0];
  const char* at = fields;
  for (int field = 3; field < 22; ++field) {
    at = std::strchr(at, ' ');
    if (!at) return 0;
    ++at;
  }
  char* end = nullptr;
  *start_time = std::strtoull(at, &end, 10);
  return end != at ? 1 : 0;
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

void CheckAllowList(const Config& config, const std::string& config_source) {
  for (const std::string& user : config.allow_users) {
    if (IsNumber(user)) continue;
    std::vector<char> buffer(16384);
    passwd entry{};
    passwd* result = nullptr;
    if (::getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &result) != 0 ||
        result == nullptr) {
      throw model::InputError(
          "Config::allow_users",
          "the user \"" + model::ExcerptText(user) + "\" in \"allow_users\" (" + config_source +
              ") does not exist on this machine; correct the name, give the uid, or create the "
              "user (`useradd`)");
    }
  }
  for (const std::string& group : config.allow_groups) {
    gid_t gid = 0;
    if (!GroupId(group, &gid)) {
      throw model::InputError(
          "Config::allow_groups",
          "the group \"" + model::ExcerptText(group) + "\" in \"allow_groups\" (" + config_source +
              ") does not exist on this machine; correct the name, give the gid, or create the "
              "group (`groupadd`)");
    }
  }
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

ProcessWatch ProcessWatch::OfPeer(int socket_fd, pid_t pid, bool allow_pidfd) {
#ifdef SO_PEERPIDFD
  if (allow_pidfd) {
    int pidfd = -1;
    socklen_t size = sizeof(pidfd);
    if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &size) == 0 && pidfd >= 0) {
      ProcessWatch watch;
      watch.method_ = Method::kPidfd;
      watch.pid_ = pid;
      watch.pidfd_ = pidfd;
      return watch;
    }
    if (errno == ESRCH || errno == EINVAL) {
      // The kernel knows the connecting process (the option exists) and it
      // has already exited. (Kernels without the option say ENOPROTOOPT.)
      ProcessWatch watch;
      watch.method_ = Method::kPidfd;
      watch.pid_ = pid;
      watch.exited_at_start_ = true;
      return watch;
    }
  }
#else
  (void)socket_fd;
#endif
  return OfProcess(pid, allow_pidfd);
}

ProcessWatch ProcessWatch::OfProcess(pid_t pid, bool allow_pidfd) {
  ProcessWatch watch;
  if (pid <= 0) return watch;  // kNone
  watch.pid_ = pid;
#ifdef SYS_pidfd_open
  if (allow_pidfd) {
    const long pidfd = ::syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
      watch.method_ = Method::kPidfd;
      watch.pidfd_ = static_cast<int>(pidfd);
      return watch;
    }
    if (errno == ESRCH) {
      watch.method_ = Method::kPidfd;
      watch.exited_at_start_ = true;
      return watch;
    }
    // ENOSYS (before 5.3), EPERM (a seccomp filter), EMFILE: poll instead.
  }
#else
  (void)allow_pidfd;
#endif
  watch.StartPolling(pid);
  return watch;
}

void ProcessWatch::StartPolling(pid_t pid) {
  char state = 0;
  const int read = ReadProcStat(pid, &state, &start_time_);
  if (read == 1) {
    method_ = Method::kProc;
    exited_at_start_ = state == 'Z' || state == 'X';
    return;
  }
  if (read == -1 && errno == ENOENT && ::access("/proc/self/stat", R_OK) == 0) {
    method_ = Method::kProc;  // /proc works, the process is gone
    exited_at_start_ = true;
    return;
  }
  method_ = Method::kKill;
  exited_at_start_ = ::kill(pid, 0) != 0 && errno == ESRCH;
}

ProcessWatch::~ProcessWatch() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : method_(other.method_),
      pid_(other.pid_),
      pidfd_(std::exchange(other.pidfd_, -1)),
      start_time_(other.start_time_),
      exited_at_start_(other.exited_at_start_) {
  other.method_ = Method::kNone;
}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) ::close(pidfd_);
    method_ = std::exchange(other.method_, Method::kNone);
    pid_ = other.pid_;
    pidfd_ = std::exchange(other.pidfd_, -1);
    start_time_ = other.start_time_;
    exited_at_start_ = other.exited_at_start_;
  }
  return *this;
}

const char* ProcessWatch::method_name() const {
  switch (method_) {
    case Method::kPidfd:
      return "pidfd";
    case Method::kProc:
      return "/proc polling";
    case Method::kKill:
      return "kill(0) polling";
    case Method::kNone:
      break;
  }
  return "none";
}

bool ProcessWatch::Exited() const {
  if (exited_at_start_) return true;
  switch (method_) {
    case Method::kPidfd: {
      pollfd entry{pidfd_, POLLIN, 0};
      return ::poll(&entry, 1, 0) > 0;
    }
    case Method::kProc: {
      char state = 0;
      unsigned long long start_time = 0;
      const int read = ReadProcStat(pid_, &state, &start_time);
      if (read == -1) return errno == ENOENT || errno == ESRCH;
      if (read == 0) return false;  // unreadable format: assume alive
      return state == 'Z' || state == 'X' || start_time != start_time_;
    }
    case Method::kKill:
      return ::kill(pid_, 0) != 0 && errno == ESRCH;
    case Method::kNone:
      break;
  }
  return false;
}

}  // namespace joulepipe::daemon

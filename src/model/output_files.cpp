// Atomic output: staged directories and atomically replaced files, the table
// of live temporaries that signal handlers clean up, and the removal of
// staging directories that runs killed outright left behind.
//
// Both rely on rename(2) being atomic within one filesystem, which is why the
// staging directory and temporary files are siblings of their destination.
#include "joulepipe/model/output_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::model {

namespace fs = std::filesystem;

namespace {

// The marker's line that names the command that wrote the output.
constexpr std::string_view kMarkerCommandPrefix = "command: joulepipe ";

// The field an output-directory error is about: the directory a caller chose.
// Messages say "the output directory '<path>'"; front ends may map the field
// to their own name for that choice (src/cli/flag_names.cpp).
constexpr char kOutputDirectoryField[] = "OutputDirectory";

// ---- Live temporaries ------------------------------------------------------------
//
// A fixed table, not a container, because RemoveLiveTemporaries runs in signal
// handlers, which may neither allocate nor lock. A slot moves
//   kFree -> kClaimed (its path being filled in; handlers skip it)
//         -> kLive (removable) <-> kCommitting (a swap in progress; handlers wait)
//         -> kFree,
// and kLive -> kRemoving -> kFree when a handler removes it. An owner
// registers its path before creating it, so there is no moment at which the
// path exists and is not registered; removing a path that does not exist yet
// (or any more) is harmless. More live temporaries than slots at once go
// unregistered: they are still removed by their destructors.
enum SlotState : int { kFree, kClaimed, kLive, kCommitting, kRemoving };

struct LiveSlot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};

constexpr int kLiveSlots = 64;
LiveSlot g_live[kLiveSlots];
std::atomic<int> g_committed{0};

static_assert(std::atomic<int>::is_always_lock_free, "signal handlers read the slot states");

// Registers `path`; returns its slot or -1 (too long, table full).
int RegisterLive(const fs::path& path) {
  const std::string& text = path.native();
  if (text.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kLiveSlots; ++i) {
    int expected = kFree;
    if (!g_live[i].state.compare_exchange_strong(expected, kClaimed)) continue;
    std::memcpy(g_live[i].path, text.c_str(), text.size() + 1);
    g_live[i].state.store(kLive);
    return i;
  }
  return -1;
}

// Moves slot `i` from `from` to `to`, waiting out a handler that is removing
// it (the process is then about to end). False if the slot was freed meanwhile.
bool MoveSlot(int i, int from, int to) {
  if (i < 0) return false;
  for (;;) {
    int expected = from;
    if (g_live[i].state.compare_exchange_strong(expected, to)) return true;
    if (expected != kRemoving) return false;
    sched_yield();
  }
}

void ReleaseLive(int* slot) {
  if (*slot < 0) return;
  if (!MoveSlot(*slot, kLive, kFree)) MoveSlot(*slot, kCommitting, kFree);
  *slot = -1;
}

// Blocks every signal in the calling thread for its lifetime: the swap of a
// commit happens whole, before or after a handler, never under one.
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// Marks a live slot as committing for its lifetime: Done() frees it (the
// output is in place), otherwise it is live again.
class CommittingSlot {
 public:
  explicit CommittingSlot(int* slot) : slot_(slot) { MoveSlot(*slot_, kLive, kCommitting); }
  ~CommittingSlot() { MoveSlot(*slot_, kCommitting, kLive); }
  CommittingSlot(const CommittingSlot&) = delete;
  CommittingSlot& operator=(const CommittingSlot&) = delete;
  void Done() { ReleaseLive(slot_); }

 private:
  int* slot_;
};

// Async-signal-safe removal of `name` (relative to `dirfd`, or absolute)
// and, if it is a directory, everything below it. Never follows a symbolic
// link: a link is removed, not its target. Gives up below a depth of 16.
void RemoveTreeAt(int dirfd, const char* name, int depth) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) ::unlinkat(dirfd, name, 0);
    return;
  }
  // Entries may be created meanwhile by another thread that still runs, so
  // read the directory again until it can be removed.
  for (int round = 0; round < 8; ++round) {
    ::lseek(fd, 0, SEEK_SET);
    alignas(8) char buffer[2048];
    long n;
    while ((n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer)) > 0) {
      for (long at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const struct dirent64*>(buffer + at);
        at += entry->d_reclen;
        const char* child = entry->d_name;
        if (child[0] == '.' && (child[1] == '\0' || (child[1] == '.' && child[2] == '\0'))) {
          continue;
        }
        if (entry->d_type == DT_DIR ||
            (::unlinkat(fd, child, 0) != 0 && (errno == EISDIR || errno == EPERM))) {
          if (depth < 16) RemoveTreeAt(fd, child, depth + 1);
        }
      }
    }
    if (::unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno != ENOTEMPTY) break;
  }
  ::close(fd);
}

// ---- Names, identity, I/O ------------------------------------------------------------

// "<name><tag>-<pid>-<random hex>": unique among concurrent runs.
std::string UniqueSuffix(std::string_view tag) {
  std::random_device device;
  const std::uint64_t random = (std::uint64_t{device()} << 32) | device();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(random));
  return std::string(tag) + "-" + std::to_string(::getpid()) + "-" + hex;
}

fs::path Sibling(const fs::path& path, std::string_view tag) {
  return path.parent_path() / (path.filename().string() + UniqueSuffix(tag));
}

// Absolute and without a trailing separator, so that filename() is the
// directory's own name ("out/" and "./out" both become "<cwd>/out").
fs::path Normalize(const fs::path& path, const std::string& display) {
  if (path.empty()) {
    throw InputError(kOutputDirectoryField, "the output directory is empty; name a directory");
  }
  std::error_code ec;
  fs::path out = fs::absolute(path, ec).lexically_normal();
  if (ec) {
    throw InputError(kOutputDirectoryField,
                     "cannot use the output directory '" + display + "': " + ec.message());
  }
  if (out.filename().empty()) out = out.parent_path();
  if (out.filename().empty() || out == out.root_path()) {
    throw InputError(kOutputDirectoryField, "cannot use '" + display +
                                                "' as the output directory; name a directory "
                                                "below it");
  }
  return out;
}

std::string ErrnoText(int error) {
  return std::strerror(error);
}

void CreateParents(const fs::path& path, const std::string& display) {
  if (path.parent_path().empty()) return;  // relative name: the current directory
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    throw InputError("cannot create the parent directory of '" + display + "': " + ec.message());
  }
}

// Writes all of `contents` to `fd` and fsyncs it. Returns 0 or errno.
int WriteAllAndSync(int fd, std::string_view contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return ::fsync(fd) == 0 ? 0 : errno;
}

// Writes all of `contents` to a new file and fsyncs it. Returns 0 or errno;
// on failure the file may exist partially and the caller removes it.
int WriteAndSync(const fs::path& path, std::string_view contents, int extra_flags,
                 unsigned mode = kPrivateFileMode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, mode);
  if (fd < 0) return errno;
  int error = WriteAllAndSync(fd, contents);
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

// Makes a rename or a new entry in `dir` durable. Best effort: some
// filesystems refuse fsync on directories, and the data is already safe.
void SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void SyncTree(const fs::path& root) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) SyncDirectory(it->path());
  }
  SyncDirectory(root);
}

std::string FirstLineOf(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What names a process beyond its pid: the running kernel (boot id), the pid
// namespace and the host. Two processes with equal identities see the same
// pids, so kill(pid, 0) answers for the other's pid too.
struct ProcessIdentity {
  std::string boot_id;
  std::string pid_namespace;
  std::string host;
  bool operator==(const ProcessIdentity&) const = default;
};

const ProcessIdentity& OwnIdentity() {
  static const ProcessIdentity identity = [] {
    ProcessIdentity id;
    id.boot_id = FirstLineOf("/proc/sys/kernel/random/boot_id");
    char buffer[256] = {};
    const ssize_t n = ::readlink("/proc/self/ns/pid", buffer, sizeof buffer - 1);
    if (n > 0) id.pid_namespace.assign(buffer, static_cast<size_t>(n));
    if (::gethostname(buffer, sizeof buffer - 1) == 0) id.host = buffer;
    return id;
  }();
  return identity;
}

std::string StagingMarkerText() {
  const ProcessIdentity& id = OwnIdentity();
  return "This is joulepipe's staging directory for an output being written by the\n"
         "process below. If that process no longer runs, it is a leftover: the next\n"
         "joulepipe run writing the same output removes it.\n"
         "pid " +
         std::to_string(::getpid()) + "\nboot_id " + id.boot_id + "\npid_namespace " +
         id.pid_namespace + "\nhost " + id.host + "\n";
}

// The pid in "<final>.tmp-<pid>-<hex>", or -1 if `name` is not of that form.
long StagingPid(const std::string& name, const std::string& final_name) {
  const std::string prefix = final_name + ".tmp-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::size_t at = prefix.size();
  long pid = 0;
  const std::size_t digits = at;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9' && at - digits < 10) {
    pid = pid * 10 + (name[at++] - '0');
  }
  if (at == digits || at >= name.size() || name[at] != '-' || pid <= 0) return -1;
  if (++at == name.size()) return -1;
  for (; at < name.size(); ++at) {
    if (std::strchr("0123456789abcdef", name[at]) == nullptr) return -1;
  }
  return pid;
}

// Whether `dir` is the staging directory of process `pid` of this machine's
// running kernel and pid namespace, and that process is gone.
bool IsStaleStaging(const fs::path& dir, long pid) {
  if (pid == ::getpid()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return false;  // alive
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return false;
  const fs::path marker = dir / kStagingMarker;
  if (!fs::is_regular_file(fs::symlink_status(marker, ec)) || fs::file_size(marker, ec) > 4096) {
    return false;
  }
  std::ifstream in(marker);
  std::string line;
  long marker_pid = -1;
  ProcessIdentity id;
  while (std::getline(in, line)) {
    const std::size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    if (key == "pid") marker_pid = std::strtol(value.c_str(), nullptr, 10);
    if (key == "boot_id") id.boot_id = value;
    if (key == "pid_namespace") id.pid_namespace = value;
    if (key == "host") id.host = value;
  }
  return marker_pid == pid && !id.boot_id.empty() && id == OwnIdentity();
}

// Removes the stale staging directories of `final_path` (StagedDirectory's
// constructor says which). Best effort: what cannot be read or removed stays.
void RemoveStaleStaging(const fs::path& final_path) {
  const std::string final_name = final_path.filename().string();
  std::error_code ec;
  for (fs::directory_iterator it(final_path.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    const long pid = StagingPid(it->path().filename().string(), final_name);
    if (pid > 0 && IsStaleStaging(it->path(), pid)) {
      std::error_code remove_ec;
      fs::remove_all(it->path(), remove_ec);
    }
  }
}

bool IsEmptyDirectory(const fs::path& dir) {
  std::error_code ec;
  return fs::is_empty(dir, ec) && !ec;
}

bool IsOurOutput(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(dir / kOutputMarker, ec));
}

// The command a joulepipe output's marker names ("" when it names none).
std::string OutputCommand(const fs::path& dir) {
  std::ifstream in(dir / kOutputMarker);
  std::string line;
  for (int n = 0; n < 8 && std::getline(in, line); ++n) {
    if (line.rfind(kMarkerCommandPrefix, 0) == 0) return line.substr(kMarkerCommandPrefix.size());
  }
  return "";
}

// Throws unless `final_path` is absent, empty, or a previous joulepipe output
// (of `command`, or of another one when `force`).
void CheckReplaceable(const fs::path& final_path, const std::string& display,
                      const std::string& command, bool force) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(final_path, ec);
  if (status.type() == fs::file_type::not_found) return;
  if (ec) {
    throw InputError(kOutputDirectoryField,
                     "cannot inspect the output directory '" + display + "': " + ec.message());
  }
  const std::string refuse = "refusing to overwrite the output directory '" + display + "': ";
  const std::string advice = "; choose another output directory or remove it";
  auto refuse_because = [&](const std::string& reason) {
    throw InputError(kOutputDirectoryField, refuse + reason + advice);
  };
  if (fs::is_symlink(status)) refuse_because("it is a symbolic link");
  if (!fs::is_directory(status)) refuse_because("it is not a directory");
  if (!IsOurOutput(final_path) && !IsEmptyDirectory(final_path)) {
    refuse_because("it exists and was not written by joulepipe");
  }
  if (force || command.empty() || !IsOurOutput(final_path)) return;
  const std::string writer = OutputCommand(final_path);
  if (!writer.empty() && writer != command) {
    throw InputError(kOutputDirectoryField,
                     "refusing to replace the output directory '" + display +
                         "': it holds the output of `joulepipe " + ExcerptText(writer) +
                         "`; pass OutputDirectory::force to replace it, or choose another output "
                         "directory");
  }
}

// Swaps two existing directories in one step where the kernel supports it,
// so the final path never disappears. Returns false if unsupported.
bool ExchangeDirectories(const fs::path& a, const fs::path& b) {
#ifdef RENAME_EXCHANGE
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
#else
  (void)a;
  (void)b;
  return false;
#endif
}

// Puts `staging` at `final_path`, which is an empty directory or a previous
// output: either swap them, or move the old one aside first. On success the
// old contents (now at `*old`) are for the caller to delete; on failure the
// old output is back in place.
void ReplaceDirectory(const fs::path& staging, const fs::path& final_path,
                      const std::string& display, fs::path* old) {
  if (ExchangeDirectories(staging, final_path)) {
    *old = staging;  // now the old output
    return;
  }
  std::error_code ec;
  const fs::path aside = Sibling(final_path, ".old");
  fs::rename(final_path, aside, ec);
  if (ec) {
    throw InputError(kOutputDirectoryField,
                     "cannot replace the output directory '" + display + "': " + ec.message());
  }
  fs::rename(staging, final_path, ec);
  if (ec) {
    std::error_code restore_ec;
    fs::rename(aside, final_path, restore_ec);
    throw InputError(kOutputDirectoryField,
                     "cannot replace the output directory '" + display + "': " + ec.message());
  }
  *old = aside;
}

void ThrowIfCancelled(const std::atomic<bool>* cancel, const std::string& what) {
  if (cancel != nullptr && cancel->load()) throw Cancelled(what + " was cancelled");
}

}  // namespace

// ---- StagedDirectory -------------------------------------------------------------------

StagedDirectory::StagedDirectory(const fs::path& final_path, std::string command, bool force)
    : final_(Normalize(final_path, final_path.string())),
      display_(final_path.string()),
      command_(std::move(command)),
      force_(force) {
  CheckReplaceable(final_, display_, command_, force_);
  CreateParents(final_, display_);
  RemoveStaleStaging(final_);
  // A collision is astronomically unlikely, but create_directory tells us,
  // so retry rather than share a directory with another run. The path is
  // registered before it is created (see the table above).
  for (int attempt = 0; attempt < 16 && staging_.empty(); ++attempt) {
    const fs::path candidate = Sibling(final_, ".tmp");
    live_slot_ = RegisterLive(candidate);
    std::error_code ec;
    if (fs::create_directory(candidate, ec)) {
      staging_ = candidate;
      // Private, or the mode of the output it will replace (with the
      // owner's rwx, so the owner can always write and later replace it);
      // its files take the directory's read and write bits (0755 -> 0644).
      struct stat existing{};
      const bool replaces = ::stat(final_.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode);
      const unsigned dir_mode =
          replaces ? (existing.st_mode & 07777) | 0700 : kPrivateDirectoryMode;
      ::chmod(candidate.c_str(), dir_mode);
      file_mode_ = replaces ? (dir_mode & 0666) | 0600 : kPrivateFileMode;
    } else {
      ReleaseLive(&live_slot_);
    }
    if (ec) {
      throw InputError(kOutputDirectoryField,
                       "cannot create a staging directory next to the output directory '" +
                           display_ + "': " + ec.message());
    }
  }
  if (staging_.empty()) {
    throw InputError(
        kOutputDirectoryField,
        "cannot create a staging directory next to the output directory '" + display_ + "'");
  }
  const int error = WriteAndSync(staging_ / kStagingMarker, StagingMarkerText(), 0);
  if (error != 0) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
    ReleaseLive(&live_slot_);
    throw InputError(kOutputDirectoryField, "cannot write into the staging directory of '" +
                                                display_ + "': " + ErrnoText(error));
  }
}

StagedDirectory::~StagedDirectory() {
  if (!committed_ && !staging_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_, ec);  // destructors must not throw; nothing else to do
  }
  ReleaseLive(&live_slot_);
}

void StagedDirectory::WriteFile(const fs::path& relative_path, std::string_view contents) {
  if (committed_) throw std::logic_error("StagedDirectory::WriteFile after Commit");
  if (relative_path.empty() || relative_path.is_absolute() || relative_path.has_root_path()) {
    throw std::invalid_argument("StagedDirectory::WriteFile: '" + relative_path.string() +
                                "' is not a relative path");
  }
  for (const fs::path& part : relative_path) {
    if (part == "..") {
      throw std::invalid_argument("StagedDirectory::WriteFile: '" + relative_path.string() +
                                  "' leaves the output directory");
    }
  }
  const fs::path path = staging_ / relative_path;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw InputError("cannot create '" + path.parent_path().string() + "': " + ec.message());
  const int error = WriteAndSync(path, contents, 0, file_mode_);
  if (error == 0) ::chmod(path.c_str(), file_mode_);  // exactly, whatever the umask
  if (error != 0) throw InputError("cannot write '" + path.string() + "': " + ErrnoText(error));
}

void StagedDirectory::Commit(const std::atomic<bool>* cancel) {
  if (committed_) throw std::logic_error("StagedDirectory::Commit called twice");
  WriteFile(
      fs::path(kOutputMarker),
      "This directory was written by joulepipe. A later run writing to the same\n"
      "directory replaces it as a whole; keep anything you want to preserve elsewhere.\n" +
          (command_.empty() ? std::string() : std::string(kMarkerCommandPrefix) + command_ + "\n"));
  ::unlink((staging_ / kStagingMarker).c_str());
  SyncTree(staging_);
  fs::path old;  // the previous output, once swapped out
  {
    // The swap: whole, before or after any signal of this thread. Handlers on
    // other threads wait for it (the slot is "committing").
    const SignalsBlocked blocked;
    ThrowIfCancelled(cancel, "writing '" + display_ + "'");
    CommittingSlot committing(&live_slot_);
    // Re-check: the path may have changed since the constructor looked.
    CheckReplaceable(final_, display_, command_, force_);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(final_, ec))) {
      ReplaceDirectory(staging_, final_, display_, &old);
    } else {
      fs::rename(staging_, final_, ec);
      if (ec == std::errc::directory_not_empty || ec == std::errc::file_exists) {
        CheckReplaceable(final_, display_, command_,
                         force_);  // created meanwhile: explain why we stop
      }
      if (ec) {
        throw InputError(kOutputDirectoryField,
                         "cannot create the output directory '" + display_ + "': " + ec.message());
      }
    }
    committed_ = true;
    g_committed.fetch_add(1);
    committing.Done();
  }
  if (!old.empty()) {
    std::error_code ec;
    fs::remove_all(old, ec);  // leftovers of the old output are harmless
  }
  SyncDirectory(final_.parent_path());
}

// ---- AtomicFile -------------------------------------------------------------------------

AtomicFile::AtomicFile(const fs::path& path) : path_(path) {
  const std::string display = path.string();
  if (path.empty() || !path.has_filename()) {
    throw InputError("cannot write '" + display + "': not a file name");
  }
  std::error_code ec;
  if (fs::is_directory(fs::status(path, ec))) {
    throw InputError("cannot write '" + display + "': it is a directory");
  }
  CreateParents(path, display);
  temp_ = Sibling(path, ".tmp");
  live_slot_ = RegisterLive(temp_);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (fd_ < 0) {
    const int error = errno;
    ReleaseLive(&live_slot_);
    throw InputError("cannot write '" + display + "': " + ErrnoText(error));
  }
  // A file replaced keeps the mode its owner gave it (how one asks for a
  // shared output: chmod it once); a new one is private.
  struct stat existing{};
  if (::stat(path.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) {
    ::fchmod(fd_, existing.st_mode & 07777);
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
  ReleaseLive(&live_slot_);
}

void AtomicFile::Commit(std::string_view contents, const std::atomic<bool>* cancel) {
  if (committed_ || fd_ < 0) throw std::logic_error("AtomicFile::Commit called twice");
  const std::string display = path_.string();
  int error = WriteAllAndSync(fd_, contents);
  if (::close(fd_) != 0 && error == 0) error = errno;
  fd_ = -1;
  if (error == 0) {
    const SignalsBlocked blocked;
    ThrowIfCancelled(cancel, "writing '" + display + "'");
    CommittingSlot committing(&live_slot_);
    if (std::rename(temp_.c_str(), path_.c_str()) == 0) {
      committed_ = true;
      g_committed.fetch_add(1);
      committing.Done();
    } else {
      error = errno;
    }
  }
  if (error != 0) {
    ::unlink(temp_.c_str());
    ReleaseLive(&live_slot_);
    throw InputError("cannot write '" + display + "': " + ErrnoText(error));
  }
  SyncDirectory(path_.parent_path().empty() ? fs::path(".") : path_.parent_path());
}

void WriteFileAtomically(const fs::path& path, std::string_view contents,
                         const std::atomic<bool>* cancel) {
  AtomicFile file(path);
  file.Commit(contents, cancel);
}

// ---- Interruptions -----------------------------------------------------------------------

int RemoveLiveTemporaries() noexcept {
  int removed = 0;
  for (LiveSlot& slot : g_live) {
    // A commit in progress on another thread takes a few renames: let it end.
    timespec start{}, now{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    while (slot.state.load() == kCommitting) {
      ::clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec >= 2) break;
      sched_yield();
    }
    int expected = kLive;
    if (!slot.state.compare_exchange_strong(expected, kRemoving)) {
      expected = kCommitting;  // waited 2 s: the commit is stuck, remove anyway
      if (!slot.state.compare_exchange_strong(expected, kRemoving)) continue;
    }
    const int saved_errno = errno;
    RemoveTreeAt(AT_FDCWD, slot.path, 0);
    errno = saved_errno;
    slot.state.store(kFree);
    ++removed;
  }
  return removed;
}

int CommittedOutputs() noexcept {
  return g_committed.load();
}

}  // namespace joulepipe::model

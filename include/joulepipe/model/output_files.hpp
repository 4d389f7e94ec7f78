// Writing results so that a failure never leaves a partial output behind.
//
// StagedDirectory collects an output directory in a sibling staging directory
// and swaps it into place only on Commit(); until then the previous output (if
// any) is untouched, and if Commit() is never reached the staging directory is
// removed. A committed directory carries the marker file kOutputMarker, which
// is what later runs check before they replace it: joulepipe only ever
// replaces its own outputs (or an empty directory), never a directory of the
// user's that happens to have the same name. AtomicFile (and its one-call form
// WriteFileAtomically) does the same for a single file.
//
// Interruptions. Every staging directory and temporary file is registered,
// from just before it is created until it is committed or removed, in a fixed
// process-wide table that a signal handler may read: a front end that stops
// on a signal calls RemoveLiveTemporaries() from its handler (or lets the
// destructors run, after a model::Cancelled), so that a killed run leaves
// nothing partial. Commit() blocks the calling thread's signals for the few
// renames of the swap, so a signal lands before it (nothing committed) or
// after it (the output complete), never in between. Only SIGKILL, a crash or
// a power cut can leave a staging directory; the next StagedDirectory for the
// same output removes it (see the constructor).
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>

namespace joulepipe::model {

// Modes of what joulepipe creates: private to the user who ran it (a plan, a
// profile or a report describes a job and its cluster). A file or output
// directory that replaces an existing one keeps that one's mode instead, and
// the files of such a directory take its read and write bits (0755 ->
// 0644), so an owner who wants an output shared chmods it once.
inline constexpr unsigned kPrivateFileMode = 0600;
inline constexpr unsigned kPrivateDirectoryMode = 0700;

// Name of the marker file inside every directory written by StagedDirectory.
inline constexpr std::string_view kOutputMarker = ".joulepipe-output";

// Name of the marker file inside a staging directory while it is being
// written: it names the process (pid, boot id, pid namespace) that owns it,
// which is what lets a later run tell a dead run's leftovers from a live one.
inline constexpr std::string_view kStagingMarker = ".joulepipe-staging";

class StagedDirectory {
 public:
  // Creates "<final>.tmp-<pid>-<random>" next to `final_path` with its
  // kStagingMarker, creating missing parent directories. Throws
  // model::InputError if that fails, or early (before any work is done) if
  // `final_path` exists and Commit() would refuse to replace it.
  //
  // Also removes stale siblings "<final>.tmp-<pid>-<hex>" left by runs that
  // were killed outright: only directories whose kStagingMarker names a
  // process of this machine's running kernel and pid namespace that no
  // longer exists (kill(pid, 0) fails with ESRCH). Anything else, including
  // a directory without the marker, one of a live process, one written on
  // another host over a shared filesystem, is kept.
  //
  // `command` names what writes it (e.g. "plan"), recorded in the marker: an
  // existing output that another command wrote is replaced only when
  // `force` is true (the command's --force), so `plan --out` never replaces
  // a `demo` or `tune` output by a slip. Outputs whose marker names no
  // command (written before markers did) count as the same command's.
  explicit StagedDirectory(const std::filesystem::path& final_path, std::string command = {},
                           bool force = false);

  // Removes the staging directory unless Commit() succeeded.
  ~StagedDirectory();

  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  // Writes (and fsyncs) `contents` to `relative_path` inside the staging
  // directory, creating subdirectories. `relative_path` must be relative and
  // must not contain "..". Throws model::InputError on I/O failure.
  void WriteFile(const std::filesystem::path& relative_path, std::string_view contents);

  // Writes the marker and moves the staging directory to the final path.
  // An existing final directory is replaced only if it holds the marker or is
  // empty; otherwise (a foreign non-empty directory, a file, a symlink) throws
  // model::InputError and leaves everything as it was. If `cancel` is given
  // and raised when the swap would start, throws model::Cancelled and commits
  // nothing (the destructor then removes the staging directory). May be
  // called once.
  void Commit(const std::atomic<bool>* cancel = nullptr);

  const std::filesystem::path& final_path() const { return final_; }
  const std::filesystem::path& staging_path() const { return staging_; }
  bool committed() const { return committed_; }

 private:
  std::filesystem::path final_;    // absolute, normalised
  std::string display_;            // the path as the caller gave it, for messages
  std::string command_;            // what writes it; "" = not said
  bool force_ = false;             // may replace another command's output
  std::filesystem::path staging_;  // sibling of final_, so rename is atomic
  bool committed_ = false;
  int live_slot_ = -1;                     // its entry in the table of live temporaries, or -1
  unsigned file_mode_ = kPrivateFileMode;  // of the files it writes (see the modes above)
};

// A file replaced atomically, prepared before the work that produces it: the
// constructor creates missing parent directories and an empty temporary file
// "<path>.tmp-<pid>-<random>" next to `path`, so that a destination that
// cannot be written fails at once, not after a long run. Commit() writes the
// contents, fsyncs, renames the temporary over `path` and fsyncs the
// directory: readers see the old contents or the new, never a mix.
class AtomicFile {
 public:
  // Throws model::InputError (naming the path and the reason) if `path` is
  // not a file name, is a directory, or its temporary cannot be created.
  explicit AtomicFile(const std::filesystem::path& path);

  // Removes the temporary file unless Commit() succeeded.
  ~AtomicFile();

  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throws model::InputError on failure (the temporary is removed, `path`
  // untouched), or model::Cancelled if `cancel` is given and raised before
  // the rename. May be called once.
  void Commit(std::string_view contents, const std::atomic<bool>* cancel = nullptr);

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  bool committed() const { return committed_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_;  // sibling of path_, so rename is atomic
  int fd_ = -1;                 // the temporary, open for writing until Commit
  bool committed_ = false;
  int live_slot_ = -1;
};

// AtomicFile(path).Commit(contents, cancel): replaces `path` atomically,
// creating missing parent directories. Throws model::InputError on failure
// (and leaves no temporary file behind).
void WriteFileAtomically(const std::filesystem::path& path, std::string_view contents,
                         const std::atomic<bool>* cancel = nullptr);

// Removes every staging directory and temporary file this process has
// registered and not yet committed or removed. Async-signal-safe (system
// calls only: no allocation, no locks), for signal handlers that are about to
// end the process; a commit in progress on another thread is waited for (at
// most 2 s), so it either completes or is removed. The owners' destructors
// stay safe to run afterwards. Returns how many paths it removed.
int RemoveLiveTemporaries() noexcept;

// How many outputs (directories and files) this process has committed so
// far. Async-signal-safe; lets a handler say whether anything was written.
int CommittedOutputs() noexcept;

}  // namespace joulepipe::model

// Writing results so that a failure never leaves a partial output behind.
//
// StagedDirectory collects an output directory in a sibling staging directory
// and swaps it into place only on Commit(); until then the previous output (if
// any) is untouched, and if Commit() is never reached the staging directory is
// removed. A committed directory carries the marker file kOutputMarker, which
// is what later runs check before they replace it: joulepipe only ever
// replaces its own outputs (or an empty directory), never a directory of the
// user's that happens to have the same name.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace joulepipe::model {

// Name of the marker file inside every directory written by StagedDirectory.
inline constexpr std::string_view kOutputMarker = ".joulepipe-output";

class StagedDirectory {
 public:
  // Creates "<final>.tmp-<pid>-<random>" next to `final_path`, creating
  // missing parent directories. Throws model::InputError if that fails, or
  // early (before any work is done) if `final_path` exists and Commit() would
  // refuse to replace it.
  explicit StagedDirectory(const std::filesystem::path& final_path);

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
  // model::InputError and leaves everything as it was. May be called once.
  void Commit();

  const std::filesystem::path& final_path() const { return final_; }
  const std::filesystem::path& staging_path() const { return staging_; }
  bool committed() const { return committed_; }

 private:
  std::filesystem::path final_;    // absolute, normalised
  std::string display_;            // the path as the caller gave it, for messages
  std::filesystem::path staging_;  // sibling of final_, so rename is atomic
  bool committed_ = false;
};

// Replaces `path` atomically: writes a temporary file in the same directory,
// fsyncs it, renames it over `path` and fsyncs the directory. Readers see the
// old contents or the new, never a mix. Creates missing parent directories.
// Throws model::InputError on failure (and leaves no temporary file behind).
void WriteFileAtomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace joulepipe::model

// Atomic output: staged directories and atomically replaced files.
//
// Both rely on rename(2) being atomic within one filesystem, which is why the
// staging directory and temporary files are siblings of their destination.
#include "joulepipe/model/output_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <system_error>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {

namespace fs = std::filesystem;

namespace {

// The field an output-directory error is about: the directory a caller chose.
// Messages say "the output directory '<path>'"; front ends may map the field
// to their own name for that choice (src/cli/flag_names.cpp).
constexpr char kOutputDirectoryField[] = "OutputDirectory";

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

// Writes all of `contents` to a new file and fsyncs it. Returns 0 or errno;
// on failure the file may exist partially and the caller removes it.
int WriteAndSync(const fs::path& path, std::string_view contents, int extra_flags) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, 0666);
  if (fd < 0) return errno;
  int error = 0;
  size_t done = 0;
  while (done < contents.size() && error == 0) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      error = errno;
    }
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
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

bool IsEmptyDirectory(const fs::path& dir) {
  std::error_code ec;
  return fs::is_empty(dir, ec) && !ec;
}

bool IsOurOutput(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(dir / kOutputMarker, ec));
}

// Throws unless `final_path` is absent, empty, or a previous joulepipe output.
void CheckReplaceable(const fs::path& final_path, const std::string& display) {
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
// old contents are deleted; on failure the old output is back in place.
void ReplaceDirectory(const fs::path& staging, const fs::path& final_path,
                      const std::string& display) {
  std::error_code ec;
  if (ExchangeDirectories(staging, final_path)) {
    fs::remove_all(staging, ec);  // now the old output; leftovers are harmless
    return;
  }
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
  fs::remove_all(aside, ec);
}

}  // namespace

StagedDirectory::StagedDirectory(const fs::path& final_path)
    : final_(Normalize(final_path, final_path.string())), display_(final_path.string()) {
  CheckReplaceable(final_, display_);
  CreateParents(final_, display_);
  // A collision is astronomically unlikely, but create_directory tells us,
  // so retry rather than share a directory with another run.
  for (int attempt = 0; attempt < 16 && staging_.empty(); ++attempt) {
    const fs::path candidate = Sibling(final_, ".tmp");
    std::error_code ec;
    if (fs::create_directory(candidate, ec)) staging_ = candidate;
    if (ec) {
      throw InputError(kOutputDirectoryField,
                       "cannot create a staging directory next to the output directory '" +
                           display_ + "': " + ec.message());
    }
  }
  if (staging_.empty()) {
    throw InputError(kOutputDirectoryField,
                     "cannot create a staging directory next to the output directory '" +
                         display_ + "'");
  }
}

StagedDirectory::~StagedDirectory() {
  if (committed_ || staging_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);  // destructors must not throw; nothing else to do
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
  const int error = WriteAndSync(path, contents, 0);
  if (error != 0) throw InputError("cannot write '" + path.string() + "': " + ErrnoText(error));
}

void StagedDirectory::Commit() {
  if (committed_) throw std::logic_error("StagedDirectory::Commit called twice");
  WriteFile(fs::path(kOutputMarker),
            "This directory was written by joulepipe. A later run writing to the same\n"
            "directory replaces it as a whole; keep anything you want to preserve elsewhere.\n");
  SyncTree(staging_);
  // Re-check: the path may have changed since the constructor looked.
  CheckReplaceable(final_, display_);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(final_, ec))) {
    ReplaceDirectory(staging_, final_, display_);
  } else {
    fs::rename(staging_, final_, ec);
    if (ec == std::errc::directory_not_empty || ec == std::errc::file_exists) {
      CheckReplaceable(final_, display_);  // created meanwhile: explain why we stop
    }
    if (ec) {
      throw InputError(kOutputDirectoryField,
                       "cannot create the output directory '" + display_ + "': " + ec.message());
    }
  }
  committed_ = true;
  SyncDirectory(final_.parent_path());
}

void WriteFileAtomically(const fs::path& path, std::string_view contents) {
  const std::string display = path.string();
  if (path.empty() || !path.has_filename()) {
    throw InputError("cannot write '" + display + "': not a file name");
  }
  CreateParents(path, display);
  const fs::path temp = Sibling(path, ".tmp");
  int error = WriteAndSync(temp, contents, O_EXCL);
  if (error == 0 && std::rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    throw InputError("cannot write '" + display + "': " + ErrnoText(error));
  }
  SyncDirectory(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

}  // namespace joulepipe::model

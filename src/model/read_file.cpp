#include "joulepipe/model/read_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::model {

namespace {

std::string Mib(double bytes) {
  // KiB below a mebibyte (a token file's 4 KiB, not "0.00391 MiB").
  if (bytes < (1 << 20)) return Format("%.3g KiB", bytes / 1024);
  return Format("%.3g MiB", bytes / (1 << 20));
}

[[noreturn]] void TooLarge(const std::string& path, const std::string& what, double bytes,
                           std::size_t max_bytes) {
  const std::string limit = Mib(static_cast<double>(max_bytes));
  if (bytes > 0) {
    throw InputError(what + " '" + path + "' is " + Mib(bytes) + ", more than the " + limit +
                     " a " + what + " may be; check that the path names the " + what +
                     " (joulepipe's own are far smaller)");
  }
  // "a profile file", "a configuration file" (not "... file file").
  const std::string a_file = what.ends_with(" file") ? what : what + " file";
  throw InputError(what + " '" + path + "' is not a regular file and sent more than " + limit +
                   " without ending; give the path of a " + a_file +
                   " (a pipe such as /dev/stdin works if it ends within " + limit + ")");
}

}  // namespace

std::string ReadWholeFile(const std::string& path, const std::string& what, std::size_t max_bytes) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw InputError("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  }
  struct stat info{};
  const bool regular = ::fstat(::fileno(file), &info) == 0 && S_ISREG(info.st_mode);
  if (regular && static_cast<std::size_t>(info.st_size) > max_bytes) {
    std::fclose(file);
    TooLarge(path, what, static_cast<double>(info.st_size), max_bytes);
  }
  std::string text;
  if (regular) text.reserve(static_cast<std::size_t>(info.st_size));
  char buffer[1 << 16];
  size_t n = 0;
  // One byte past the limit tells a source that is too long from one that is
  // exactly at it.
  while (text.size() <= max_bytes && (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    text.append(buffer, n);
  }
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    throw InputError("cannot read " + what + " '" + path + "': " + std::strerror(error));
  }
  if (text.size() > max_bytes) {
    // A regular file that grew while it was read counts by its size.
    TooLarge(path, what, regular ? static_cast<double>(text.size()) : 0, max_bytes);
  }
  return text;
}

}  // namespace joulepipe::model

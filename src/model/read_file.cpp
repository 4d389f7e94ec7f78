#include "read_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {

std::string ReadWholeFile(const std::string& path, const std::string& what) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw InputError("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    throw InputError("cannot read " + what + " '" + path + "': " + std::strerror(error));
  }
  return text;
}

}  // namespace joulepipe::model

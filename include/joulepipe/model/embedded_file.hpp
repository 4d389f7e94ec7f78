// EmbeddedFile: a data file built into the binary (cmake/embed_files.cmake),
// so catalogs under data/ are available without the source tree.
#pragma once

#include <string_view>
#include <vector>

namespace joulepipe {

struct EmbeddedFile {
  std::string_view name;     // file name without directory, e.g. "a40.json"
  std::string_view content;  // the file's bytes
};

}  // namespace joulepipe

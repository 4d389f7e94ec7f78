// The CLI writes its outputs through model/output_files.hpp (StagedDirectory
// for output directories, WriteFileAtomically for single files); these names
// keep the CLI's code short.
#pragma once

#include <filesystem>
#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/output_files.hpp"

namespace joulepipe::cli {

using model::kOutputMarker;
using model::StagedDirectory;
using model::WriteFileAtomically;

// A user's file is replaced only when asked: throws model::InputError
// "<flag> <path> exists; pass --force to replace it, ..." when `path`
// exists and `force` is false. Call it before any work.
inline void RefuseToReplace(const std::string& flag, const std::string& path, bool force) {
  if (force || !std::filesystem::exists(path)) return;
  throw model::InputError(
      flag, flag + " " + path + " exists; pass --force to replace it, or choose another file");
}

}  // namespace joulepipe::cli

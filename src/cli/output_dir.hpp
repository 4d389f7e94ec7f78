// The CLI writes its outputs through model/output_files.hpp (StagedDirectory
// for output directories, WriteFileAtomically for single files); these names
// keep the CLI's code short.
#pragma once

#include "joulepipe/model/output_files.hpp"

namespace joulepipe::cli {

using model::kOutputMarker;
using model::StagedDirectory;
using model::WriteFileAtomically;

}  // namespace joulepipe::cli

// Subcommand's one non-virtual call, kept here so that subcommand.hpp need
// not include CLI11.
#include "subcommand.hpp"

#include <CLI/CLI.hpp>

namespace joulepipe::cli {

bool Subcommand::parsed() const {
  return command_->parsed();
}

}  // namespace joulepipe::cli

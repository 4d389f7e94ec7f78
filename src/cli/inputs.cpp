// Flag reading and the checks on user input that only the command line has.
#include "inputs.hpp"

#include <CLI/CLI.hpp>

#include "joulepipe/model/error.hpp"

namespace joulepipe::cli {

std::optional<double> IfGiven(const CLI::Option* option, double value) {
  if (option->count() == 0) return std::nullopt;
  return value;
}

schedule::Spec ScheduleFromFlags(const std::string& name, int stages, int microbatches, int chunks,
                                 bool chunks_given) {
  schedule::Spec spec;
  if (!schedule::ParseKind(name, &spec.kind)) {
    throw model::InputError("--schedule '" + name + "' is not one of gpipe, 1f1b, interleaved");
  }
  const bool interleaved = spec.kind == schedule::Kind::kInterleaved;
  if (!interleaved && chunks_given) {
    throw model::InputError("--chunks applies only to --schedule interleaved (got --schedule " +
                            name + "); drop --chunks or use --schedule interleaved");
  }
  if (interleaved && chunks < 2) {
    throw model::InputError("--chunks must be at least 2 for --schedule interleaved (got " +
                            std::to_string(chunks) +
                            "); use --schedule 1f1b for one chunk per stage");
  }
  spec.stages = stages;
  spec.microbatches = microbatches;
  spec.chunks = interleaved ? chunks : 1;
  return spec;
}

}  // namespace joulepipe::cli

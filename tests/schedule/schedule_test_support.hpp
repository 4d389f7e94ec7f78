// Helpers shared by the schedule tests.
#pragma once

#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::schedule::testing {

inline Spec MakeSpec(Kind kind, int stages, int microbatches, int chunks = 1) {
  Spec spec;
  spec.kind = kind;
  spec.stages = stages;
  spec.microbatches = microbatches;
  spec.chunks = chunks;
  return spec;
}

// The message of the model::InputError that `action()` throws, or "" if it
// throws none.
template <typename Action>
std::string InputErrorOf(Action&& action) {
  try {
    action();
  } catch (const model::InputError& error) {
    return error.what();
  }
  return "";
}

}  // namespace joulepipe::schedule::testing

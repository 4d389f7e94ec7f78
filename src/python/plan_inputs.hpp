// Shared by the planning bindings: a schedule::Spec from Python's arguments.
#pragma once

#include <string>

#include "bindings.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::python {

// Throws model::InputError naming Spec::kind for an unknown schedule name
// ("gpipe", "1f1b", "interleaved"); the counts are checked by the callee.
schedule::Spec SpecFrom(const std::string& schedule, int stages, int microbatches, int chunks);

void BindSimulate(py::module_& m);

}  // namespace joulepipe::python

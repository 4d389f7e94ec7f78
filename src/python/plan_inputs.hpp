// Shared by the planning bindings: a schedule::Spec from Python's arguments.
#pragma once

#include <string>

#include "bindings.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/operating_point.hpp"

namespace joulepipe::python {

// Throws model::InputError naming Spec::kind for an unknown schedule name
// ("gpipe", "1f1b", "interleaved"); the counts are checked by the callee.
schedule::Spec SpecFrom(const std::string& schedule, int stages, int microbatches, int chunks);

// model::ChooseGoal with the fields named as the keywords the plan calls
// take (slowdown, least_energy, energy_budget_j, power_budget_w).
model::Objective ChooseGoalAsKeywords(const model::GoalChoice& choice, double* slowdown);

void BindSimulate(py::module_& m);

}  // namespace joulepipe::python

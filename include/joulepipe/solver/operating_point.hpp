// The objective's choice on a solver frontier: model::ChooseOperatingPoint
// (model/objective.hpp, the one rule) over the frontier's (time, energy).
#pragma once

#include <cstddef>

#include "joulepipe/model/objective.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::solver {

// model::ChooseOperatingPoint over `frontier`'s points; throws as it does.
std::size_t ChooseOperatingPoint(const Frontier& frontier, const model::Objective& objective,
                                 double deadline_s, int gpus, double scale = 1);

}  // namespace joulepipe::solver

// Plans of clocks over a schedule: the uniform ones (every instruction at
// the highest, or lowest, clock its profile row has: the all-max-clock
// baseline every figure is compared with, and the slowest uniform plan) and
// the plan file of any clock per node. The planner (solver) and the report
// (which replays the baseline) use the same rule.
#pragma once

#include <cstdint>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::schedule {

// Clock per node id. Throws model::InputError naming the row the profile
// lacks.
std::vector<std::uint16_t> UniformClocks(const Schedule& schedule, const model::Profile& profile,
                                         bool highest);

// The plan file running node i at mhz[i] (no knobs, no prediction).
model::Plan PlanOfClocks(const Schedule& schedule, const std::vector<std::uint16_t>& mhz);

}  // namespace joulepipe::schedule

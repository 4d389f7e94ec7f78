// What the `evaluate` command adds to schedule::EvaluatePlan: the report for
// people and the JSON line.
#pragma once

#include <string>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::cli {

// Human-readable report of an evaluation of `plan` (named in `request`).
std::string FormatEvaluation(const schedule::PlanEvaluation& evaluation, const model::Plan& plan,
                             const schedule::EvaluateRequest& request);

// {"time_s":..,"energy_j":..,"busy_energy_j":..,"blocking_energy_j":..} with
// 17 significant digits, and a trailing newline.
std::string EvaluationJson(const schedule::ReplayResult& replay);

}  // namespace joulepipe::cli

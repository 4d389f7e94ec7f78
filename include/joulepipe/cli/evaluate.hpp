// The `evaluate` command without its argument parsing: the time and energy of
// a plan file on a profile, computed by schedule::Replay, the reference
// evaluator that shares no code with the solver. Agreement between a plan's
// "predicted" figures and this replay cross-checks the planner.
#pragma once

#include <string>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::cli {

struct PlanEvaluation {
  schedule::Spec spec;  // the schedule the plan declares
  schedule::ReplayResult replay;
};

// Builds the schedule the plan declares (schedule, num_stages,
// num_microbatches, num_chunks), checks that the plan's lists agree with it
// and that the profile fits, and replays. Throws model::InputError naming
// `plan_name` or `profile_name` and the field at fault.
PlanEvaluation EvaluatePlan(const model::Profile& profile, const std::string& profile_name,
                            const model::Plan& plan, const std::string& plan_name,
                            double p_block_w);

// Human-readable report of an evaluation.
std::string FormatEvaluation(const PlanEvaluation& evaluation, const model::Plan& plan,
                             const std::string& plan_name, const std::string& profile_name,
                             double p_block_w);

// {"time_s":..,"energy_j":..,"busy_energy_j":..,"blocking_energy_j":..} with
// 17 significant digits, and a trailing newline.
std::string EvaluationJson(const schedule::ReplayResult& replay);

}  // namespace joulepipe::cli

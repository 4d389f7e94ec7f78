// The task "evaluate a plan": the time and energy of a plan file on a
// profile, computed by Replay (replay.hpp), the reference evaluator that
// shares no code with the solver. Agreement between a plan's "predicted"
// figures and this replay cross-checks the planner.
//
// The schedule comes from the plan file (its schedule, num_stages,
// num_microbatches and num_chunks), so errors about it name those JSON
// fields and the file, never Spec::* fields.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::schedule {

struct EvaluateRequest {
  // GPU power while blocked or idle (W). Unset: the profile's metadata
  // p_block_w (the same rule as solver::PlanRequest::p_block_w).
  std::optional<double> p_block_w;
  // Clocks while waiting (model/wait_model.hpp); its p_block_w is replaced
  // by the P_block above. Unset: waits at P_block (uncalibrated).
  std::optional<model::WaitModel> waits;
  std::string profile_name = "the profile";  // names the profile in messages
  std::string plan_name = "the plan";        // names the plan in messages
};

struct PlanEvaluation {
  Spec spec;  // the schedule the plan declares
  ReplayResult replay;
  double p_block_w = 0;            // the P_block replayed with (W)
  std::string p_block_source;      // "request" or "profile" (its metadata)
  std::vector<std::string> notes;  // for people, e.g. two different P_block values
  std::string wait_model;          // WaitModel::Describe() of the model replayed with
};

// Builds the schedule the plan declares, checks that the plan's lists agree
// with it and that the profile fits, and replays. Throws model::InputError
// naming the plan file and its field, the profile, or
// EvaluateRequest::p_block_w.
PlanEvaluation EvaluatePlan(const model::Profile& profile, const model::Plan& plan,
                            const EvaluateRequest& request);

}  // namespace joulepipe::schedule

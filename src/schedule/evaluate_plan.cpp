#include "joulepipe/schedule/evaluate_plan.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string_view>
#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/schedule/profile_fit.hpp"

namespace joulepipe::schedule {

namespace {

using model::InputError;

// The Spec came from the plan file: its fields read as the file's.
constexpr std::pair<std::string_view, std::string_view> kPlanFileFields[] = {
    {"Spec::kind", "schedule"},
    {"Spec::stages", "num_stages"},
    {"Spec::microbatches", "num_microbatches"},
    {"Spec::chunks", "num_chunks"},
};

constexpr char kRegenerate[] = "fix the field or regenerate the plan with joulepipe plan";

Spec DeclaredSpec(const model::Plan& plan, const std::string& plan_name) {
  Spec spec;
  if (!ParseKind(plan.schedule, &spec.kind)) {
    throw InputError(plan_name + ": schedule '" + model::ExcerptText(plan.schedule) +
                     "' is not a schedule joulepipe knows; use gpipe, 1f1b or interleaved");
  }
  spec.stages = plan.num_stages;
  spec.microbatches = plan.num_microbatches;
  spec.chunks = plan.num_chunks;
  return spec;
}

std::string Position(std::size_t stage, std::size_t index) {
  return "stages[" + std::to_string(stage) + "][" + std::to_string(index) + "]";
}

// The header counts must agree with the stage lists. Replay would also
// refuse a mismatch, but only as "position i differs"; this names the field.
void CheckDeclaredCounts(const model::Plan& plan, const std::string& plan_name) {
  if (plan.stages.size() != static_cast<std::size_t>(plan.num_stages)) {
    throw InputError(plan_name + ": num_stages is " + std::to_string(plan.num_stages) +
                     " but 'stages' holds " + std::to_string(plan.stages.size()) +
                     " lists (one per stage); " + kRegenerate);
  }
  int max_microbatch = -1;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    for (std::size_t i = 0; i < plan.stages[s].size(); ++i) {
      const model::Instruction& in = plan.stages[s][i].instruction;
      if (in.microbatch >= plan.num_microbatches) {
        throw InputError(plan_name + ": num_microbatches is " +
                         std::to_string(plan.num_microbatches) + " but " + Position(s, i) +
                         " names microbatch " + std::to_string(in.microbatch) + "; " + kRegenerate);
      }
      if (in.chunk >= plan.num_chunks) {
        throw InputError(plan_name + ": num_chunks is " + std::to_string(plan.num_chunks) +
                         " but " + Position(s, i) + " names chunk " + std::to_string(in.chunk) +
                         "; " + kRegenerate);
      }
      max_microbatch = std::max(max_microbatch, in.microbatch);
    }
  }
  if (max_microbatch + 1 < plan.num_microbatches) {
    throw InputError(plan_name + ": num_microbatches is " + std::to_string(plan.num_microbatches) +
                     " but the stage lists name microbatches only up to " +
                     std::to_string(max_microbatch) + "; " + kRegenerate);
  }
  // Build's work grows with the declared counts, the lists with the file: a
  // 3 KB plan declaring "num_chunks": 3000000 took 49 s and 6.5 GB before
  // this check (found by tests/fuzz/plan_json_main.cpp). Every schedule runs
  // 2 x num_microbatches x num_chunks instructions per stage; near misses
  // are left to Replay, which names the first missing position.
  std::size_t listed = 0;
  for (const auto& stage : plan.stages) listed += stage.size();
  const double declared = 2.0 * plan.num_stages * plan.num_microbatches * plan.num_chunks;
  if (declared > 4.0 * static_cast<double>(listed) + 1024) {
    char count[64];
    std::snprintf(count, sizeof count, "%.0f", declared);
    throw InputError(plan_name + ": num_stages " + std::to_string(plan.num_stages) +
                     ", num_microbatches " + std::to_string(plan.num_microbatches) +
                     " and num_chunks " + std::to_string(plan.num_chunks) +
                     " declare a schedule of " + count +
                     " instructions but the stage lists hold only " + std::to_string(listed) +
                     "; " + kRegenerate);
  }
}

}  // namespace

PlanEvaluation EvaluatePlan(const model::Profile& profile, const model::Plan& plan,
                            const EvaluateRequest& request) {
  const std::string& plan_name = request.plan_name;
  PlanEvaluation evaluation;
  const PBlockChoice p_block =
      ResolvePBlock(request.p_block_w, profile, "EvaluateRequest::p_block_w", request.profile_name);
  evaluation.p_block_w = p_block.watts;
  evaluation.p_block_source = p_block.source;
  evaluation.notes = p_block.notes;
  evaluation.spec = DeclaredSpec(plan, plan_name);
  CheckDeclaredCounts(plan, plan_name);
  // Spec errors name the plan file's fields: the numbers came from there.
  Schedule schedule;
  try {
    schedule = Build(evaluation.spec);
  } catch (const InputError& e) {
    throw InputError(plan_name + ": " + model::RenameFields(e.what(), kPlanFileFields) + "; " +
                     kRegenerate);
  }
  try {
    CheckProfileFits(profile, evaluation.spec, request.profile_name);
  } catch (const InputError& e) {
    throw InputError(plan_name + ": " + model::RenameFields(e.what(), kPlanFileFields));
  }
  model::WaitModel waits =
      request.waits ? *request.waits : model::FlatWaitModel(evaluation.p_block_w);
  waits.p_block_w = evaluation.p_block_w;
  evaluation.wait_model = waits.Describe();
  int planned_waits = 0;
  for (const auto& stage : plan.stages) {
    for (const model::PlannedInstruction& in : stage) planned_waits += in.wait_mhz > 0 ? 1 : 0;
  }
  if (planned_waits > 0 && !waits.calibrated()) {
    evaluation.notes.push_back(
        "the plan lowers the clock in " + std::to_string(planned_waits) +
        " waits, priced here at P_block; set EvaluateRequest::waits to the wait "
        "model it was planned with to price them");
  }
  evaluation.replay = Replay(schedule, profile, plan, waits, plan_name);
  return evaluation;
}

}  // namespace joulepipe::schedule

// The `evaluate` command's work: check a plan file against the schedule it
// declares and the profile, then replay it.
#include "joulepipe/cli/evaluate.hpp"

#include <algorithm>
#include <cstddef>

#include "joulepipe/cli/format.hpp"
#include "joulepipe/cli/inputs.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

constexpr char kRegenerate[] = "fix the field or regenerate the plan with joulepipe plan";

schedule::Spec DeclaredSpec(const model::Plan& plan, const std::string& plan_name) {
  schedule::Spec spec;
  if (!schedule::ParseKind(plan.schedule, &spec.kind)) {
    throw InputError(plan_name + ": schedule '" + plan.schedule +
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
}

schedule::Schedule BuildDeclared(const schedule::Spec& spec, const std::string& plan_name) {
  try {
    return schedule::Build(spec);
  } catch (const InputError& e) {
    // Build names command-line flags; here the numbers came from the file.
    throw InputError(plan_name + ": its schedule, num_stages, num_microbatches and num_chunks " +
                     "do not form a valid schedule (" + e.what() + "); " + kRegenerate);
  }
}

double RelativeDifference(double value, double reference) {
  return (value - reference) / reference;
}

}  // namespace

PlanEvaluation EvaluatePlan(const model::Profile& profile, const std::string& profile_name,
                            const model::Plan& plan, const std::string& plan_name,
                            double p_block_w) {
  CheckPBlock(p_block_w);
  PlanEvaluation evaluation;
  evaluation.spec = DeclaredSpec(plan, plan_name);
  CheckDeclaredCounts(plan, plan_name);
  const schedule::Schedule schedule = BuildDeclared(evaluation.spec, plan_name);
  std::string shape = "plan " + plan_name + " (num_stages " + std::to_string(plan.num_stages);
  if (plan.num_chunks > 1) shape += ", num_chunks " + std::to_string(plan.num_chunks);
  shape += ")";
  CheckProfileFits(profile, evaluation.spec, profile_name, shape,
                   "evaluate the plan with the profile it was made from");
  evaluation.replay = schedule::Replay(schedule, profile, plan, p_block_w, plan_name);
  return evaluation;
}

std::string FormatEvaluation(const PlanEvaluation& evaluation, const model::Plan& plan,
                             const std::string& plan_name, const std::string& profile_name,
                             double p_block_w) {
  const schedule::ReplayResult& r = evaluation.replay;
  std::string s;
  s += "Figures are GPU energy, computed from the profile by replaying the plan (not measured).\n";
  s += Printf("  plan        %s (%s)\n", plan_name.c_str(), ShapeText(evaluation.spec).c_str());
  s += Printf("  profile     %s\n", profile_name.c_str());
  s += Printf("  P_block     %g W\n", p_block_w);
  s += Printf("  time        %.6f s\n", r.time_s);
  s += Printf("  energy      %.1f J\n", r.energy_j);
  s += Printf("    busy      %.1f J (sum of instruction energies)\n", r.busy_energy_j);
  s += Printf("    blocking  %.1f J (P_block x time each GPU waits)\n", r.blocking_energy_j);
  if (plan.predicted) {
    const model::Prediction& p = *plan.predicted;
    s += Printf("  predicted   %.6f s, %.1f J (recorded in the plan by the planner)\n", p.time_s,
                p.energy_j);
    s += Printf("  difference  time %+.3g, energy %+.3g (relative, replay vs predicted)\n",
                RelativeDifference(r.time_s, p.time_s), RelativeDifference(r.energy_j, p.energy_j));
  }
  return s;
}

std::string EvaluationJson(const schedule::ReplayResult& replay) {
  return "{\"time_s\": " + Exact(replay.time_s) + ", \"energy_j\": " + Exact(replay.energy_j) +
         ", \"busy_energy_j\": " + Exact(replay.busy_energy_j) +
         ", \"blocking_energy_j\": " + Exact(replay.blocking_energy_j) + "}\n";
}

}  // namespace joulepipe::cli

// The `evaluate` command's report, from a schedule::PlanEvaluation.
#include "evaluate_command.hpp"

#include "flag_names.hpp"
#include "format.hpp"
#include "plan_command.hpp"

namespace joulepipe::cli {

namespace {

double RelativeDifference(double value, double reference) {
  return (value - reference) / reference;
}

}  // namespace

std::string FormatEvaluation(const schedule::PlanEvaluation& evaluation, const model::Plan& plan,
                             const schedule::EvaluateRequest& request) {
  const schedule::ReplayResult& r = evaluation.replay;
  std::string s;
  s += "Figures are GPU energy, computed from the profile by replaying the plan (not measured).\n";
  s += Printf("  plan        %s (%s)\n", request.plan_name.c_str(),
              ShapeText(evaluation.spec).c_str());
  s += Printf("  profile     %s\n", request.profile_name.c_str());
  s += Printf("  P_block     %g W %s\n", evaluation.p_block_w,
              PBlockOrigin(evaluation.p_block_source).c_str());
  for (const std::string& note : evaluation.notes) {
    s += Printf("  note        %s\n", WithFlagNames(note).c_str());
  }
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

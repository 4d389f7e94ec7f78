#include "plan_power_limits.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "flag_names.hpp"
#include "format.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "plan_command.hpp"

namespace joulepipe::cli {
namespace {

std::string Watts(double w) {
  return w > 0 ? Printf("%.1f", w) : std::string("default");
}

std::string LimitsText(const std::vector<double>& watts, char separator) {
  std::string s;
  for (std::size_t i = 0; i < watts.size(); ++i) {
    if (i > 0) s += separator;
    s += watts[i] > 0 ? Exact(watts[i]) : "0";
  }
  return s;
}

}  // namespace

LimitRange ResolveLimitRange(const model::ProfileMetadata& metadata, double min_flag_w,
                             double max_flag_w) {
  try {
    const physics::PowerLimitRange r =
        physics::PowerLimitRangeFor(metadata.gpu, min_flag_w, max_flag_w);
    return LimitRange{r.min_w, r.max_w, WithFlagNames(r.source)};
  } catch (const model::InputError& e) {
    throw model::InputError(WithFlagNames(e.what()));
  }
}

std::string LimitFrontierCsv(const LimitPlanOutcome& outcome) {
  std::string s = "time_s,energy_j,power_limits_w\n";
  for (const solver::LimitPoint& p : outcome.plan.limits.points) {
    s += Exact(p.time_s) + "," + Exact(p.energy_j) + "," + LimitsText(p.watts, ';') + "\n";
  }
  return s;
}

std::string LimitSummaryJson(const LimitPlanOutcome& outcome) {
  using nlohmann::ordered_json;
  const solver::PipelinePlan& clocks = outcome.plan.clocks;
  const solver::LimitPoint& chosen = outcome.plan.limits.points[outcome.plan.chosen];
  const solver::FrontierPoint& clock_chosen = clocks.chosen_point();
  const double t0 = clocks.baseline.time_s, e0 = clocks.baseline.energy_j;
  ordered_json root;
  root["version"] = 1;
  root["figures"] = kFiguresSource;
  root["lever"] = "power-limit";
  root["inputs"] = {{"profile", clocks.request.profile_name},
                    {"schedule", std::string(schedule::KindName(clocks.request.spec.kind))},
                    {"stages", clocks.request.spec.stages},
                    {"microbatches", clocks.request.spec.microbatches},
                    {"chunks", clocks.request.spec.chunks},
                    {"p_block_w", clocks.p_block_w},
                    {"slowdown", clocks.request.slowdown},
                    {"goal", std::string(model::GoalName(clocks.request.objective.goal))},
                    {"min_power_limit_w", outcome.range.min_w},
                    {"max_power_limit_w", outcome.range.max_w},
                    {"power_limit_range_from", outcome.range.source}};
  root["baseline"] = {{"time_s", t0}, {"energy_j", e0}};
  root["deadline_s"] = clocks.deadline_s;
  ordered_json stages = ordered_json::array();
  for (std::size_t s = 0; s < chosen.watts.size(); ++s) stages.push_back(chosen.watts[s]);
  root["chosen"] = {{"time_s", chosen.time_s},
                    {"energy_j", chosen.energy_j},
                    {"saving_pct", SavingPercent(chosen.energy_j, e0)},
                    {"slowdown_pct", SlowdownPercent(chosen.time_s, t0)},
                    {"power_limits_w", stages}};
  root["clock_plan"] = {{"time_s", clock_chosen.time_s},
                        {"energy_j", clock_chosen.energy_j},
                        {"saving_pct", SavingPercent(clock_chosen.energy_j, e0)}};
  root["frontier_points"] = outcome.plan.limits.points.size();
  root["evaluations"] = outcome.plan.limits.evaluations;
  root["solve_seconds"] = outcome.plan.solve_seconds;
  return root.dump(2) + "\n";
}

std::string FormatLimitSummary(const LimitPlanOutcome& outcome, const std::string& out_dir) {
  const solver::PipelinePlan& clocks = outcome.plan.clocks;
  const solver::PlanRequest& r = clocks.request;
  const solver::LimitFrontier& f = outcome.plan.limits;
  const solver::LimitPoint& chosen = f.points[outcome.plan.chosen];
  const solver::FrontierPoint& clock_chosen = clocks.chosen_point();
  const double t0 = clocks.baseline.time_s, e0 = clocks.baseline.energy_j;
  std::string s;
  s += Printf("Figures are %s.\n", kFiguresSource);
  s += "inputs\n";
  s += Printf("  profile     %s\n", r.profile_name.c_str());
  if (!outcome.profile_method.empty()) {
    s += Printf("  method      %s\n", outcome.profile_method.c_str());
  }
  s += Printf("  schedule    %s (%d instructions)\n", ShapeText(r.spec).c_str(),
              clocks.schedule.num_nodes());
  s += Printf("  P_block     %g W %s (GPU power while blocked or idle)\n", clocks.p_block_w,
              PBlockOrigin(clocks.p_block_source).c_str());
  s += "  lever       power limits: one per stage (GPU), default clocks, nothing locked\n";
  if (outcome.range.source.empty()) {
    s += "  limits      any (the profile names no GPU the catalogue knows; pass\n"
         "              --min-power-limit/--max-power-limit, see `joulepipe gpus`)\n";
  } else {
    s += Printf("  limits      %s .. %s W, from %s\n", Watts(outcome.range.min_w).c_str(),
                Watts(outcome.range.max_w).c_str(), outcome.range.source.c_str());
  }
  if (r.objective.goal == model::Goal::kWithinDeadline) {
    s += Printf("  slowdown    %g%% allowed: deadline %.6f s\n", 100 * r.slowdown,
                clocks.deadline_s);
  } else {
    s += "  objective   least energy at any speed\n";
  }
  s += "baseline (every GPU at its default limit: every instruction at its highest clock)\n";
  s += Printf("  time        %.6f s\n", t0);
  s += Printf("  energy      %.1f J\n", e0);
  s += "chosen power-limit plan\n";
  s += Printf("  time        %.6f s (%s)\n", chosen.time_s,
              model::SlowdownText(chosen.time_s, t0).c_str());
  s += Printf("  energy      %.1f J GPU (saving %.2f%%)\n", chosen.energy_j,
              SavingPercent(chosen.energy_j, e0));
  s += "  stage  limit W   clocks it gives (MHz, per profile row)\n";
  for (std::size_t st = 0; st < chosen.watts.size(); ++st) {
    std::string rows;
    const auto& options = f.options[st];
    const solver::LimitOption* option = &options[0];
    for (const solver::LimitOption& o : options) {
      if (o.watts == chosen.watts[st]) option = &o;
    }
    for (std::size_t k = 0; k < f.rows[st].size(); ++k) {
      const solver::LimitRow& row = f.rows[st][k];
      rows += Printf("%s%s %d", k ? ", " : "", std::string(model::KindName(row.kind)).c_str(),
                     option->mhz[k]);
      if (f.rows[st].size() > 2) rows += Printf(" (row %d)", row.profile_stage);
    }
    s += Printf("  %-5zu  %-8s  %s\n", st, Watts(chosen.watts[st]).c_str(), rows.c_str());
  }
  s += "compared with per-instruction clocks (the same objective)\n";
  s += Printf(
      "  clocks      %.6f s, %.1f J (saving %.2f%%): locking clocks would save %.2f pp "
      "more\n",
      clock_chosen.time_s, clock_chosen.energy_j, SavingPercent(clock_chosen.energy_j, e0),
      SavingPercent(clock_chosen.energy_j, e0) - SavingPercent(chosen.energy_j, e0));
  s += "frontier (power-limit plans)\n";
  s += Printf("  points      %zu, %.6f s .. %.6f s; %ld plans evaluated in %.3f s\n",
              f.points.size(), f.points.front().time_s, f.points.back().time_s, f.evaluations,
              outcome.plan.solve_seconds);
  s += "  model       each instruction runs at the highest profiled clock whose mean power\n"
       "              is within its GPU's limit (the board caps clocks by power)\n";
  if (!out_dir.empty()) {
    const char* slash = out_dir.back() == '/' ? "" : "/";
    s += Printf("output        %s%s (frontier.csv, chosen.json, summary.json)\n", out_dir.c_str(),
                slash);
  }
  return s;
}

void WriteLimitOutputs(const LimitPlanOutcome& outcome, StagedDirectory* staged,
                       const std::atomic<bool>* cancel) {
  staged->WriteFile("chosen.json", model::PlanToJson(solver::ToPlan(
                                       outcome.plan.clocks.schedule,
                                       outcome.plan.limits.points[outcome.plan.chosen])));
  staged->WriteFile("frontier.csv", LimitFrontierCsv(outcome));
  staged->WriteFile("summary.json", LimitSummaryJson(outcome));
  staged->Commit(cancel);
}

}  // namespace joulepipe::cli

// The `plan` command's work: solve, choose, thin, write, summarise.
//
// The chosen plan is the least-energy frontier point whose EXACT time is
// within the deadline (1 + slowdown) * T_maxclock. The solver is asked to plan
// for that deadline exactly (Options::extra_deadlines_s), so the choice does
// not depend on where the grid happens to fall.
#include "joulepipe/cli/planning.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "joulepipe/cli/format.hpp"
#include "joulepipe/cli/frontier_chart.hpp"
#include "joulepipe/cli/inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/report/line_chart.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

// Index of the nearest point to `target` (by time) not yet selected, or
// points.size() if every point is selected. `points` ascend in time.
std::size_t NearestUnselected(const std::vector<solver::FrontierPoint>& points,
                              const std::vector<bool>& selected, double target) {
  const std::size_t n = points.size();
  const auto it =
      std::lower_bound(points.begin(), points.end(), target,
                       [](const solver::FrontierPoint& p, double t) { return p.time_s < t; });
  std::size_t right = static_cast<std::size_t>(it - points.begin());
  while (right < n && selected[right]) ++right;
  std::size_t left = static_cast<std::size_t>(it - points.begin());
  while (left > 0 && selected[left - 1]) --left;
  const bool has_left = left > 0;
  if (!has_left) return right;  // may be n: nothing left of target either
  if (right == n) return left - 1;
  return target - points[left - 1].time_s <= points[right].time_s - target ? left - 1 : right;
}

}  // namespace

void CheckPlanRequest(const PlanRequest& request) {
  schedule::CheckStagesAndMicrobatches(request.spec);
  CheckPBlock(request.p_block_w);
  if (!std::isfinite(request.slowdown) || request.slowdown < 0) {
    throw InputError(
        Printf("--slowdown must be a finite fraction >= 0 (got %g); e.g. --slowdown "
               "0.05 allows iterations 5%% longer than at full clock",
               request.slowdown));
  }
  if (!std::isfinite(request.resolution_s) || request.resolution_s <= 0) {
    throw InputError(Printf("--resolution-ms must be a finite number of milliseconds > 0 (got %g)",
                            request.resolution_s * 1e3));
  }
  if (request.max_plans < 0 || request.max_plans == 1 || request.max_plans == 2) {
    throw InputError("--max-plans must be 0 (write every frontier plan) or at least 3 (got " +
                     std::to_string(request.max_plans) +
                     "): the fastest, the chosen and the least-energy plans are always written");
  }
}

PlanOutcome PreparePlan(const PlanRequest& request, const model::Profile& profile) {
  CheckPlanRequest(request);
  PlanOutcome outcome;
  outcome.request = request;
  outcome.schedule = schedule::Build(request.spec);
  const schedule::Schedule& schedule = outcome.schedule;
  CheckProfileFitsFlags(profile, request.spec, request.profile_name);
  // The deadline must be known before solving so the solver plans for it.
  outcome.baseline =
      solver::EvaluateClocks(schedule, profile, request.p_block_w,
                             solver::UniformClocks(schedule, profile, /*highest=*/true));
  outcome.deadline_s = (1 + request.slowdown) * outcome.baseline.time_s;
  CheckGridSize(outcome.baseline.time_s,
                solver::EvaluateClocks(schedule, profile, request.p_block_w,
                                       solver::UniformClocks(schedule, profile, /*highest=*/false))
                    .time_s,
                request.resolution_s);
  return outcome;
}

void SolvePlan(const model::Profile& profile, std::FILE* progress, PlanOutcome* outcome) {
  const PlanRequest& request = outcome->request;
  if (progress != nullptr) {
    std::fprintf(progress, "joulepipe: planning %d instructions (%s) on a %g ms grid...\n",
                 outcome->schedule.num_nodes(), ShapeText(request.spec).c_str(),
                 request.resolution_s * 1e3);
    std::fflush(progress);
  }
  solver::Options options;
  options.p_block_w = request.p_block_w;
  options.resolution_s = request.resolution_s;
  options.extra_deadlines_s = {outcome->deadline_s};
  const auto started = std::chrono::steady_clock::now();
  // Long solves report where they are, at most once a second and only after
  // the first two seconds, so short runs stay quiet.
  if (progress != nullptr) {
    auto last = started;
    options.progress = [progress, started, last](const char* phase, double fraction) mutable {
      const auto now = std::chrono::steady_clock::now();
      if (now - started < std::chrono::seconds(2) || now - last < std::chrono::seconds(1)) return;
      last = now;
      std::fprintf(progress, "joulepipe: %s %3.0f%% (%.0f s)\n", phase, 100 * fraction,
                   std::chrono::duration<double>(now - started).count());
      std::fflush(progress);
    };
  }
  outcome->frontier = solver::SolveFrontier(outcome->schedule, profile, options);
  outcome->solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const std::vector<solver::FrontierPoint>& points = outcome->frontier.points;
  const solver::FrontierPoint* best = outcome->frontier.BestWithin(outcome->deadline_s);
  // The all-max-clock plan meets the deadline, and the frontier keeps it or a
  // point that dominates it, so there is always a choice.
  if (best == nullptr) throw std::logic_error("the frontier has no plan within the deadline");
  outcome->chosen = static_cast<std::size_t>(best - points.data());
  outcome->written = SelectPoints(points, outcome->chosen, request.max_plans);
  outcome->bound_energy_j = outcome->frontier.BoundAt(outcome->baseline.time_s);
}

std::vector<std::size_t> SelectPoints(const std::vector<solver::FrontierPoint>& points,
                                      std::size_t keep, int max_points) {
  const std::size_t n = points.size();
  std::vector<std::size_t> out;
  if (n == 0) return out;
  if (max_points <= 0 || static_cast<std::size_t>(max_points) >= n) {
    for (std::size_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> selected(n, false);
  selected[0] = selected[n - 1] = selected[std::min(keep, n - 1)] = true;
  std::size_t count = static_cast<std::size_t>(std::count(selected.begin(), selected.end(), true));
  // Fill the remaining slots with the points nearest to evenly spaced times
  // strictly between the fastest and the slowest. n > max_points >= count
  // guarantees an unselected point exists for every slot.
  const std::size_t extra = static_cast<std::size_t>(max_points) > count
                                ? static_cast<std::size_t>(max_points) - count
                                : 0;
  const double t0 = points.front().time_s, t1 = points.back().time_s;
  for (std::size_t j = 1; j <= extra; ++j) {
    const double target = t0 + (t1 - t0) * static_cast<double>(j) / static_cast<double>(extra + 1);
    const std::size_t pick = NearestUnselected(points, selected, target);
    if (pick >= n) break;
    selected[pick] = true;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (selected[i]) out.push_back(i);
  }
  return out;
}

std::string PlanFileName(std::size_t j) {
  return Printf("plans/plan_%05zu.json", j);
}

std::string FrontierCsv(const PlanOutcome& outcome) {
  std::string out = "time_s,energy_j,plan_file\n";
  for (std::size_t j = 0; j < outcome.written.size(); ++j) {
    const solver::FrontierPoint& p = outcome.frontier.points[outcome.written[j]];
    out += Exact(p.time_s) + "," + Exact(p.energy_j) + "," + PlanFileName(j) + "\n";
  }
  return out;
}

std::string SummaryJson(const PlanOutcome& outcome) {
  using nlohmann::ordered_json;
  const PlanRequest& r = outcome.request;
  const solver::FrontierPoint& chosen = outcome.chosen_point();
  const double t0 = outcome.baseline.time_s, e0 = outcome.baseline.energy_j;
  const auto chosen_slot =
      std::lower_bound(outcome.written.begin(), outcome.written.end(), outcome.chosen) -
      outcome.written.begin();

  ordered_json inputs;
  inputs["profile"] = r.profile_name;
  inputs["schedule"] = std::string(schedule::KindName(r.spec.kind));
  inputs["stages"] = r.spec.stages;
  inputs["microbatches"] = r.spec.microbatches;
  inputs["chunks"] = r.spec.chunks;
  inputs["instructions"] = outcome.schedule.num_nodes();
  inputs["p_block_w"] = r.p_block_w;
  inputs["slowdown"] = r.slowdown;
  inputs["resolution_s"] = r.resolution_s;
  inputs["max_plans"] = r.max_plans;

  ordered_json root;
  root["version"] = 1;
  root["figures"] = kFiguresSource;
  root["inputs"] = inputs;
  root["baseline"] = {{"time_s", t0}, {"energy_j", e0}};
  root["deadline_s"] = outcome.deadline_s;
  root["chosen"] = {{"time_s", chosen.time_s},
                    {"energy_j", chosen.energy_j},
                    {"saving_pct", SavingPercent(chosen.energy_j, e0)},
                    {"slowdown_pct", SlowdownPercent(chosen.time_s, t0)},
                    {"plan_file", PlanFileName(static_cast<std::size_t>(chosen_slot))}};
  root["bound_at_baseline"] = {{"time_s", t0},
                               {"energy_j", outcome.bound_energy_j},
                               {"saving_pct", SavingPercent(outcome.bound_energy_j, e0)}};
  root["frontier"] = {{"points", outcome.frontier.points.size()},
                      {"plans_written", outcome.written.size()},
                      {"fastest_time_s", outcome.frontier.points.front().time_s},
                      {"slowest_time_s", outcome.frontier.points.back().time_s},
                      {"least_energy_j", outcome.frontier.points.back().energy_j},
                      {"relaxation_steps", outcome.frontier.stats.relaxation_steps},
                      {"deadlines", outcome.frontier.stats.deadlines},
                      {"refined_deadlines", outcome.frontier.stats.refined},
                      {"relaxation_seconds", outcome.frontier.stats.relaxation_seconds},
                      {"rounding_seconds", outcome.frontier.stats.rounding_seconds}};
  root["solve_seconds"] = outcome.solve_seconds;
  return root.dump(2) + "\n";
}

std::string FrontierSvg(const PlanOutcome& outcome) {
  const PlanRequest& r = outcome.request;
  const solver::FrontierPoint& chosen = outcome.chosen_point();
  const std::string label = Printf("chosen: %.1f%% less energy",
                                   SavingPercent(chosen.energy_j, outcome.baseline.energy_j));
  return report::RenderSvg(
      FrontierChart(outcome.frontier, outcome.baseline, {{label, chosen.time_s, chosen.energy_j}},
                    1.0, "Iteration time-energy frontier, " + ShapeText(r.spec),
                    r.profile_name + Printf(", P_block %g W; ", r.p_block_w) + kFiguresSource));
}

void WritePlanOutputs(const PlanOutcome& outcome, StagedDirectory* staged) {
  for (std::size_t j = 0; j < outcome.written.size(); ++j) {
    const solver::FrontierPoint& point = outcome.frontier.points[outcome.written[j]];
    staged->WriteFile(PlanFileName(j), model::PlanToJson(solver::ToPlan(outcome.schedule, point)));
  }
  const model::Plan chosen = solver::ToPlan(outcome.schedule, outcome.chosen_point());
  staged->WriteFile("chosen.json", model::PlanToJson(chosen));
  staged->WriteFile("chosen.py", model::PlanToPointSolution(chosen) + "\n");
  staged->WriteFile("frontier.csv", FrontierCsv(outcome));
  staged->WriteFile("summary.json", SummaryJson(outcome));
  staged->WriteFile("frontier.svg", FrontierSvg(outcome));
  staged->Commit();
}

std::string FormatPlanSummary(const PlanOutcome& outcome, const std::string& out_dir) {
  const PlanRequest& r = outcome.request;
  const solver::FrontierPoint& chosen = outcome.chosen_point();
  const double t0 = outcome.baseline.time_s, e0 = outcome.baseline.energy_j;
  std::string s;
  s += Printf("Figures are %s.\n", kFiguresSource);
  s += "inputs\n";
  s += Printf("  profile     %s\n", r.profile_name.c_str());
  s += Printf("  schedule    %s (%d instructions)\n", ShapeText(r.spec).c_str(),
              outcome.schedule.num_nodes());
  s += Printf("  P_block     %g W (GPU power while blocked or idle)\n", r.p_block_w);
  s +=
      Printf("  slowdown    %g%% allowed: deadline %.6f s\n", 100 * r.slowdown, outcome.deadline_s);
  s += "baseline (every instruction at its highest clock)\n";
  s += Printf("  time        %.6f s\n", t0);
  s += Printf("  energy      %.1f J\n", e0);
  s += "chosen plan (least energy within the deadline)\n";
  s += Printf("  time        %.6f s (slowdown %.3f%%)\n", chosen.time_s,
              SlowdownPercent(chosen.time_s, t0));
  s += Printf("  energy      %.1f J (saving %.2f%%)\n", chosen.energy_j,
              SavingPercent(chosen.energy_j, e0));
  s += Printf("  bound: %.2f%% saving (no plan can beat the linear relaxation)\n",
              SavingPercent(outcome.bound_energy_j, e0));
  if (r.slowdown > 0) {
    s += Printf("  bound at the deadline: %.2f%% saving\n",
                SavingPercent(outcome.frontier.BoundAt(outcome.deadline_s), e0));
  }
  s += "frontier\n";
  if (out_dir.empty()) {
    s += Printf("  points      %zu computed (no files written; pass --out DIR)\n",
                outcome.frontier.points.size());
  } else {
    s += Printf("  points      %zu computed, %zu plans written\n", outcome.frontier.points.size(),
                outcome.written.size());
  }
  s += Printf("  range       %.6f s .. %.6f s, %.1f J .. %.1f J\n",
              outcome.frontier.points.front().time_s, outcome.frontier.points.back().time_s,
              outcome.frontier.points.front().energy_j, outcome.frontier.points.back().energy_j);
  s += Printf("  solve time  %.3f s\n", outcome.solve_seconds);
  if (!out_dir.empty()) {
    const char* slash = out_dir.back() == '/' ? "" : "/";
    s += Printf(
        "output        %s%s (frontier.csv, frontier.svg, chosen.json, chosen.py,\n"
        "              summary.json, plans/)\n",
        out_dir.c_str(), slash);
  }
  return s;
}

}  // namespace joulepipe::cli

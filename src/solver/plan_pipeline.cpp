#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/schedule/clock_plans.hpp"
#include "joulepipe/solver/wait_plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <utility>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/schedule/profile_fit.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/solver/cost_hull.hpp"

namespace joulepipe::solver {

namespace {

using model::InputError;

using model::Format;

// Throws InputError(field, message) unless 1 <= value <= most.
void RequireCount(const char* field, int value, int most, const char* what) {
  if (value >= 1 && value <= most) return;
  throw InputError(field, Format("%s must be 1..%d (got %d): %s", field, most, value, what));
}

// `x` > 0 rounded up to `digits` significant digits: the least such number
// >= x (a hair above it where x already has that many digits).
double RoundUpSignificant(double x, int digits) {
  if (!(x > 0) || !std::isfinite(x)) return x;
  const double unit = std::pow(10.0, std::floor(std::log10(x)) - (digits - 1));
  return std::ceil(x / unit * (1 + 1e-12)) * unit;
}

// ---- The grid's real span ------------------------------------------------------

// The clocks of the fastest and of the least-energy option of every
// instruction among the options that are not dominated (slower and not
// cheaper in effective energy than another clock of the same (stage, kind)):
// exactly the options the solver plans with (cost_hull.hpp), so the grid
// spans the two plans' times. `widest` says which (stage, kind) spans the
// most, for the message when the grid is too fine.
struct UsefulClocks {
  std::vector<std::uint16_t> fastest, cheapest;
  std::string widest;
};

UsefulClocks UsefulClocksOf(const schedule::Schedule& schedule, const model::Profile& profile,
                            double p_block_w) {
  const int profile_stages = profile.num_stages();
  std::map<std::pair<int, model::Kind>, std::pair<Option, Option>> ends;
  double widest_ratio = 0;
  UsefulClocks out;
  out.fastest.resize(schedule.num_nodes());
  out.cheapest.resize(schedule.num_nodes());
  for (int node = 0; node < schedule.num_nodes(); ++node) {
    const model::Instruction& ins = schedule.nodes[node];
    const int stage = schedule::ProfileStage(schedule.spec, profile_stages, ins);
    auto it = ends.find({stage, ins.kind});
    if (it == ends.end()) {
      const CostHull hull = BuildCostHull(profile.Points(stage, ins.kind), p_block_w);
      const Option& fast = hull.pareto.front();
      const Option& cheap = hull.pareto.back();
      it = ends.emplace(std::pair{stage, ins.kind}, std::pair{fast, cheap}).first;
      const double ratio = cheap.time_s / fast.time_s;
      if (ratio > widest_ratio) {
        widest_ratio = ratio;
        out.widest = Format(
            "the widest instruction is stage %d %s: %.6g s at %d MHz, its fastest clock, to "
            "%.6g s at %d MHz, its least-energy one (%.3gx)",
            stage, std::string(model::KindName(ins.kind)).c_str(), fast.time_s, fast.mhz,
            cheap.time_s, cheap.mhz, ratio);
      }
    }
    out.fastest[node] = static_cast<std::uint16_t>(it->second.first.mhz);
    out.cheapest[node] = static_cast<std::uint16_t>(it->second.second.mhz);
  }
  return out;
}

}  // namespace

void CheckPlanRequest(const PlanRequest& request) {
  schedule::CheckStagesAndMicrobatches(request.spec);
  RequireCount("Spec::stages", request.spec.stages, kMaxStages,
               "the pipeline's stages (GPUs per pipeline)");
  RequireCount("Spec::microbatches", request.spec.microbatches, kMaxMicrobatches,
               "the microbatches per iteration");
  RequireCount("Spec::chunks", request.spec.chunks, kMaxChunks,
               "model chunks per stage (1 except for the interleaved schedule)");
  if (request.p_block_w) model::CheckPBlock(*request.p_block_w, "PlanRequest::p_block_w");
  if (!std::isfinite(request.slowdown) || request.slowdown < 0 || request.slowdown > kMaxSlowdown) {
    throw InputError("PlanRequest::slowdown",
                     Format("PlanRequest::slowdown must be a fraction 0..%g (got %g); e.g. "
                            "0.05 allows iterations 5%% longer than at full clock",
                            kMaxSlowdown, request.slowdown));
  }
  model::CheckObjective(request.objective);
  if (!std::isfinite(request.objective_scale) || request.objective_scale <= 0) {
    throw InputError("PlanRequest::objective_scale",
                     Format("PlanRequest::objective_scale must be > 0 (got %g): how many copies "
                            "of the pipeline the objective's budgets cover",
                            request.objective_scale));
  }
  if (!std::isfinite(request.resolution_s) || request.resolution_s <= 0 ||
      request.resolution_s > kMaxResolutionS) {
    throw InputError("PlanRequest::resolution_s",
                     Format("PlanRequest::resolution_s must be a time > 0 and at most an hour, "
                            "%.0f ms (got %g ms); e.g. 1 ms",
                            kMaxResolutionS * 1e3, request.resolution_s * 1e3));
  }
  for (std::size_t i = 0; i < request.extra_deadline_factors.size(); ++i) {
    const double factor = request.extra_deadline_factors[i];
    if (std::isfinite(factor) && factor > 0 && factor <= kMaxDeadlineFactor) continue;
    throw InputError("PlanRequest::extra_deadline_factors",
                     Format("PlanRequest::extra_deadline_factors[%zu] must be a multiple of the "
                            "all-max-clock time > 0 and at most %g (got %g); e.g. 1.2 for a "
                            "straggler that takes 1.2 times as long",
                            i, kMaxDeadlineFactor, factor));
  }
}

void CheckGridSize(double fastest_s, double slowest_s, double resolution_s,
                   const std::string& why) {
  const double deadlines = std::max(0.0, slowest_s - fastest_s) / resolution_s;
  if (deadlines <= kMaxGridDeadlines) return;
  // Rounded UP to the 3 significant digits the message shows, so the advice
  // plans when followed (rounding to nearest once advised 16.1 ms where
  // 16.1x ms was the least that fits).
  const double finest_ms = RoundUpSignificant((slowest_s - fastest_s) / kMaxGridDeadlines * 1e3, 3);
  throw InputError(
      "PlanRequest::resolution_s",
      Format("the useful plans take from %.6g s (the fastest clocks) to %.6g s (the "
             "least-energy ones); PlanRequest::resolution_s of %g ms would plan about %.0f "
             "deadlines between them (at most %.0f); use %.3g ms or more",
             fastest_s, slowest_s, resolution_s * 1e3, deadlines, kMaxGridDeadlines, finest_ms) +
          (why.empty() ? "" : "; " + why));
}

PipelinePlan PreparePipelinePlan(const model::Profile& profile, const PlanRequest& request) {
  CheckPlanRequest(request);
  PipelinePlan plan;
  plan.request = request;
  const schedule::PBlockChoice p_block = schedule::ResolvePBlock(
      request.p_block_w, profile, "PlanRequest::p_block_w", request.profile_name);
  plan.p_block_w = p_block.watts;
  plan.p_block_source = p_block.source;
  plan.notes = p_block.notes;
  plan.schedule = schedule::Build(request.spec);
  const schedule::Schedule& schedule = plan.schedule;
  schedule::CheckProfileFits(profile, request.spec, request.profile_name);
  model::CheckProfileRows(profile, request.profile_name);
  // The deadline must be known before solving so the solver plans for it.
  plan.baseline = EvaluateClocks(schedule, profile, plan.p_block_w,
                                 schedule::UniformClocks(schedule, profile, /*highest=*/true));
  plan.deadline_s = (1 + request.slowdown) * plan.baseline.time_s;
  // The grid spans the plans the solver can make from undominated options
  // only: a dominated slow clock never widens it.
  const UsefulClocks useful = UsefulClocksOf(schedule, profile, plan.p_block_w);
  plan.slowest_s = EvaluateClocks(schedule, profile, plan.p_block_w, useful.cheapest).time_s;
  const double fastest_s =
      std::min(plan.baseline.time_s,
               EvaluateClocks(schedule, profile, plan.p_block_w, useful.fastest).time_s);
  CheckGridSize(fastest_s, plan.slowest_s, request.resolution_s, useful.widest);
  return plan;
}

void SolvePipelinePlan(const model::Profile& profile, PipelinePlan* plan) {
  const PlanRequest& request = plan->request;
  Options options;
  options.p_block_w = plan->p_block_w;
  options.resolution_s = request.resolution_s;
  options.extra_deadlines_s = {plan->deadline_s};
  for (double factor : request.extra_deadline_factors) {
    options.extra_deadlines_s.push_back(factor * plan->baseline.time_s);
  }
  options.progress = request.progress;
  options.cancel = request.cancel;
  const auto started = std::chrono::steady_clock::now();
  plan->frontier = SolveFrontier(plan->schedule, profile, options);
  plan->solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // The all-max-clock plan meets the deadline, and the frontier keeps it or a
  // point that dominates it, so within the deadline there is always a choice.
  model::Objective objective = request.objective;
  if (objective.outside_wait_w == 0) objective.outside_wait_w = plan->p_block_w;
  plan->chosen = ChooseOperatingPoint(plan->frontier, objective, plan->deadline_s,
                                      request.spec.stages, request.objective_scale);
  plan->bound_energy_j = plan->frontier.BoundAt(plan->baseline.time_s);
  if (request.waits) {
    const model::WaitModel& w = *request.waits;
    if (!w.gpu.empty() && !profile.metadata.gpu.empty() && w.gpu != profile.metadata.gpu) {
      plan->notes.push_back("the wait model " + w.source + " was calibrated on " + w.gpu +
                            " but the profile is of " + profile.metadata.gpu +
                            "; calibrate on the profile's GPU for figures that hold");
    }
    plan->waits = PriceWaits(profile, *plan, w);
    plan->chosen = plan->waits->chosen;
  }
}

PipelinePlan PlanPipeline(const model::Profile& profile, const PlanRequest& request) {
  PipelinePlan plan = PreparePipelinePlan(profile, request);
  SolvePipelinePlan(profile, &plan);
  return plan;
}

}  // namespace joulepipe::solver

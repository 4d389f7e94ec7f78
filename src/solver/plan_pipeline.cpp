#include "joulepipe/solver/plan_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/profile_fit.hpp"

namespace joulepipe::solver {

namespace {

using model::InputError;

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

}  // namespace

void CheckPlanRequest(const PlanRequest& request) {
  schedule::CheckStagesAndMicrobatches(request.spec);
  if (request.p_block_w) model::CheckPBlock(*request.p_block_w, "PlanRequest::p_block_w");
  if (!std::isfinite(request.slowdown) || request.slowdown < 0) {
    throw InputError("PlanRequest::slowdown",
                     Format("PlanRequest::slowdown must be a finite fraction >= 0 (got %g); e.g. "
                            "0.05 allows iterations 5%% longer than at full clock",
                            request.slowdown));
  }
  if (!std::isfinite(request.resolution_s) || request.resolution_s <= 0) {
    throw InputError("PlanRequest::resolution_s",
                     Format("PlanRequest::resolution_s must be a finite time > 0 (got %g ms); "
                            "e.g. 1 ms",
                            request.resolution_s * 1e3));
  }
  for (std::size_t i = 0; i < request.extra_deadline_factors.size(); ++i) {
    const double factor = request.extra_deadline_factors[i];
    if (std::isfinite(factor) && factor > 0) continue;
    throw InputError("PlanRequest::extra_deadline_factors",
                     Format("PlanRequest::extra_deadline_factors[%zu] must be a finite multiple "
                            "> 0 of the all-max-clock time (got %g); e.g. 1.2 for a straggler "
                            "that takes 1.2 times as long",
                            i, factor));
  }
}

void CheckGridSize(double fastest_s, double slowest_s, double resolution_s) {
  const double deadlines = std::max(0.0, slowest_s - fastest_s) / resolution_s;
  if (deadlines <= kMaxGridDeadlines) return;
  const double finest_ms = (slowest_s - fastest_s) / kMaxGridDeadlines * 1e3;
  throw InputError(
      "PlanRequest::resolution_s",
      Format("PlanRequest::resolution_s of %g ms would plan about %.0f deadlines between %.6f s "
             "and %.6f s (at most %.0f); use %.3g ms or more",
             resolution_s * 1e3, deadlines, fastest_s, slowest_s, kMaxGridDeadlines,
             finest_ms * 1.001));
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
  // The deadline must be known before solving so the solver plans for it.
  plan.baseline = EvaluateClocks(schedule, profile, plan.p_block_w,
                                 UniformClocks(schedule, profile, /*highest=*/true));
  plan.deadline_s = (1 + request.slowdown) * plan.baseline.time_s;
  plan.slowest_s = EvaluateClocks(schedule, profile, plan.p_block_w,
                                  UniformClocks(schedule, profile, /*highest=*/false))
                       .time_s;
  CheckGridSize(plan.baseline.time_s, plan.slowest_s, request.resolution_s);
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

  const FrontierPoint* best = plan->frontier.BestWithin(plan->deadline_s);
  // The all-max-clock plan meets the deadline, and the frontier keeps it or a
  // point that dominates it, so there is always a choice.
  if (best == nullptr) throw std::logic_error("the frontier has no plan within the deadline");
  plan->chosen = static_cast<std::size_t>(best - plan->frontier.points.data());
  plan->bound_energy_j = plan->frontier.BoundAt(plan->baseline.time_s);
}

PipelinePlan PlanPipeline(const model::Profile& profile, const PlanRequest& request) {
  PipelinePlan plan = PreparePipelinePlan(profile, request);
  SolvePipelinePlan(profile, &plan);
  return plan;
}

}  // namespace joulepipe::solver

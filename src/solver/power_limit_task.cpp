// solver::PlanPowerLimits: the task every front end calls
// (power_limit_plan.hpp).
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/solver/power_limit_plan.hpp"

namespace joulepipe::solver {

void CheckPowerLimitRequest(const PowerLimitRequest& request) {
  const model::Objective& o = request.plan.objective;
  // A limit plan is chosen by its deadline or at any speed: budgets and host
  // power would need the node's figures the limit search does not keep.
  if (o.goal == model::Goal::kEnergyBudget || o.goal == model::Goal::kPowerBudget) {
    const char* field = o.goal == model::Goal::kEnergyBudget ? "Objective::energy_budget_j"
                                                             : "Objective::power_budget_w";
    throw model::InputError(
        field, std::string(field) +
                   " is not supported by power-limit plans; they take the least energy within "
                   "PlanRequest::slowdown of the all-max-clock time, or at any speed");
  }
  if (model::CountsHost(o)) {
    throw model::InputError("Objective::host_power_w",
                            "Objective::host_power_w is not supported by power-limit plans; "
                            "leave it at 0 (GPU energy only)");
  }
  for (const auto& [watts, field] : {std::pair{request.min_limit_w, "min_limit_w"},
                                     std::pair{request.max_limit_w, "max_limit_w"}}) {
    const std::string name = std::string("PowerLimitRequest::") + field;
    model::Require(std::isfinite(watts) && watts >= 0, name.c_str(),
                   model::Format("PowerLimitRequest::%s must be a power >= 0 W, 0 for none (got "
                                 "%g)",
                                 field, watts));
  }
  model::Require(request.max_limit_w == 0 || request.min_limit_w <= request.max_limit_w,
                 "PowerLimitRequest::min_limit_w",
                 model::Format("PowerLimitRequest::min_limit_w (%g W) is above max_limit_w (%g W)",
                               request.min_limit_w, request.max_limit_w));
  CheckPlanRequest(request.plan);
}

namespace {

PowerLimitPlan PreparePowerLimitPlan(const model::Profile& profile,
                                     const PowerLimitRequest& request) {
  CheckPowerLimitRequest(request);
  PowerLimitPlan plan;
  plan.request = request;
  plan.clocks = PreparePipelinePlan(profile, request.plan);
  return plan;
}

void SolvePowerLimitPlan(const model::Profile& profile, PowerLimitPlan* plan) {
  const PowerLimitRequest& request = plan->request;
  LimitPlanOptions options;
  options.p_block_w = plan->clocks.p_block_w;
  options.min_limit_w = request.min_limit_w;
  options.max_limit_w = request.max_limit_w;
  options.deadlines_s = {plan->clocks.deadline_s};
  options.cancel = request.plan.cancel;
  const auto started = std::chrono::steady_clock::now();
  plan->limits = SolveLimitFrontier(plan->clocks.schedule, profile, options);
  plan->solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (request.compare_clocks) SolvePipelinePlan(profile, &plan->clocks);
  const std::vector<LimitPoint>& points = plan->limits.points;
  if (request.plan.objective.goal == model::Goal::kLeastEnergy) {
    plan->chosen = points.size() - 1;
  } else {
    // The defaults are the baseline, whose time fixes the deadline.
    const LimitPoint* best = plan->limits.BestWithin(plan->clocks.deadline_s);
    plan->chosen = best != nullptr ? static_cast<std::size_t>(best - points.data()) : 0;
  }
}

}  // namespace

PowerLimitPlan PlanPowerLimits(const model::Profile& profile, const PowerLimitRequest& request,
                               const std::function<void(const PowerLimitPlan&)>& prepared) {
  PowerLimitPlan plan = PreparePowerLimitPlan(profile, request);
  if (prepared) prepared(plan);
  SolvePowerLimitPlan(profile, &plan);
  return plan;
}

}  // namespace joulepipe::solver

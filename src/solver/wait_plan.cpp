#include "joulepipe/solver/wait_plan.hpp"
#include "joulepipe/schedule/clock_plans.hpp"

#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::solver {

namespace {

schedule::ReplayResult ReplayPoint(const model::Profile& profile, const PipelinePlan& plan,
                                   const model::WaitModel& waits, const FrontierPoint& point) {
  return schedule::Replay(plan.schedule, profile, ToPlan(plan.schedule, point), waits,
                          "frontier point");
}

}  // namespace

WaitPricing PriceWaits(const model::Profile& profile, const PipelinePlan& plan,
                       model::WaitModel waits) {
  WaitPricing pricing;
  waits.p_block_w = plan.p_block_w;
  pricing.waits = std::move(waits);
  const Frontier& frontier = plan.frontier;
  Frontier priced;
  priced.points.reserve(frontier.points.size());
  for (const FrontierPoint& point : frontier.points) {
    if (plan.request.cancel != nullptr && plan.request.cancel->load()) {
      throw model::Cancelled("pricing the waits");
    }
    const schedule::ReplayResult replay = ReplayPoint(profile, plan, pricing.waits, point);
    pricing.energy_j.push_back(replay.energy_j);
    FrontierPoint& out = priced.points.emplace_back();
    out.time_s = point.time_s;
    out.energy_j = replay.energy_j;
  }
  FrontierPoint max_clock;
  max_clock.mhz = schedule::UniformClocks(plan.schedule, profile, /*highest=*/true);
  pricing.baseline_energy_j = ReplayPoint(profile, plan, pricing.waits, max_clock).energy_j;
  const PlanRequest& r = plan.request;
  pricing.chosen =
      ChooseOperatingPoint(priced, r.objective, plan.deadline_s, r.spec.stages, r.objective_scale);
  const FrontierPoint& chosen = frontier.points[pricing.chosen];
  const schedule::ReplayResult replay = ReplayPoint(profile, plan, pricing.waits, chosen);
  pricing.wait_s = replay.wait_s;
  pricing.lowered_wait_s = replay.lowered_wait_s;
  pricing.chosen_plan = ToPlan(plan.schedule, chosen);
  pricing.lowered_waits = schedule::AnnotateWaits(replay, pricing.waits, &pricing.chosen_plan);
  return pricing;
}

model::Plan PlanWithWaits(const model::Profile& profile, const PipelinePlan& plan,
                          const model::WaitModel& waits, std::size_t index) {
  const FrontierPoint& point = plan.frontier.points.at(index);
  model::Plan out = ToPlan(plan.schedule, point);
  schedule::AnnotateWaits(ReplayPoint(profile, plan, waits, point), waits, &out);
  return out;
}

}  // namespace joulepipe::solver

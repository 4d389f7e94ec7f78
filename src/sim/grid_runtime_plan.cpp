#include "joulepipe/sim/grid_runtime_plan.hpp"

#include <algorithm>
#include <cmath>

#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::sim {

std::optional<GridRuntimePlan> PlanGridRuntime(const schedule::Schedule& schedule,
                                               const model::Profile& profile, const JobSpec& job,
                                               const solver::Frontier& frontier,
                                               const std::vector<CandidatePlan>& candidates,
                                               const GridPlan& plan,
                                               const GridRuntimePlanRequest& request) {
  const ShapedPoint* pick = FloorlessChoice(plan);
  if (pick == nullptr) return std::nullopt;
  GridRuntimePlan out;
  out.point = *pick;
  out.candidate = candidates.at(static_cast<std::size_t>(pick->candidate));
  const CandidatePlan& c = out.candidate;
  solver::FrontierPoint point;
  point.time_s = c.time_s;
  point.energy_j = c.energy_j;
  point.mhz = c.mhz;
  out.file = solver::ToPlan(schedule, point);
  out.file.predicted = model::Prediction{c.time_s, c.energy_j};

  model::GridShape shape;
  for (const std::vector<int>& order : schedule.stage_order) {
    int hold = 0;
    for (int id : order) hold = std::max<int>(hold, frontier.max_clock.mhz[id]);
    shape.hold_mhz.push_back(hold);
  }
  const GridLimits& limits = request.grid.limits;
  const bool ramp =
      request.start_ramp_s > 0 || (request.start_ramp_s < 0 && limits.max_ramp_w_per_s > 0);
  if (ramp) {
    StartRampRequest rr;
    rr.max_ramp_w_per_s = limits.max_ramp_w_per_s;
    rr.window_s = request.grid.options.ramp_window_s;
    rr.seconds = std::max(0.0, request.start_ramp_s);
    rr.idle_w_per_gpu = job.p_block_w;
    rr.gpus_per_stage = std::int64_t{job.pipelines} * job.gpus_per_stage;
    const StartRamp& sr = out.start_ramp.emplace(PlanStartRamp(schedule, profile, c, rr));
    out.ramp_meets =
        limits.max_ramp_w_per_s <= 0 || sr.ramp_w_per_s <= limits.max_ramp_w_per_s * (1 + 1e-9);
    if (request.start_ramp_s < 0 && sr.mhz.size() == 1) {
      out.ramp =
          out.ramp_meets ? GridRuntimePlan::Ramp::kNotNeeded : GridRuntimePlan::Ramp::kCannotHelp;
    } else {
      out.ramp = GridRuntimePlan::Ramp::kSteps;
      shape.start_ramp_s = std::round(sr.seconds() * 1e6) / 1e6;  // 0.3, not 0.30000000000000004
      shape.start_ramp_mhz = sr.mhz;
      shape.stop_ramp_s = shape.start_ramp_s;  // the same steps, descending
    }
  }
  shape.pipeline_offset_s = pick->offset_s;
  out.file.grid = shape;
  return out;
}

}  // namespace joulepipe::sim

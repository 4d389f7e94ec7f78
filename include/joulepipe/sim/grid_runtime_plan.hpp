// The grid plan the runtime runs (the task behind `simulate --grid-plan-out`):
// the least-energy (plan, offset) pair that keeps a grid limit with no
// floor (the runtime burns no filler load), its waits held at each stage's
// highest clock (the power the simulation counts for a wait, P_block), a
// start ramp, and the stop ramp, as one plan file (model::Plan with its
// model::GridShape). Front ends print it; the choices are made here.
#pragma once

#include <optional>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/sim/grid_plan.hpp"

namespace joulepipe::sim {

struct GridRuntimePlanRequest {
  // The grid plan's own request (its limits, options and deadline).
  GridPlanRequest grid;
  // The start ramp: < 0 sized for grid.limits.max_ramp_w_per_s (none
  // without a ramp limit); 0 none; > 0 this many seconds, whatever the limit.
  double start_ramp_s = -1;
};

struct GridRuntimePlan {
  ShapedPoint point;        // the (plan, offset) pair chosen, floor 0
  CandidatePlan candidate;  // its plan
  model::Plan file;         // what the runtime reads: clocks, prediction, grid shape

  // The start ramp, as the plan file has it or why it has none.
  enum class Ramp {
    kNone,        // not asked for (no ramp limit, start_ramp_s 0)
    kNotNeeded,   // idle to computing is within the ramp limit at once
    kCannotHelp,  // idle to the profile's lowest clock is already beyond it
    kSteps,       // file.grid->start_ramp_* (and the same steps to stop)
  } ramp = Ramp::kNone;
  std::optional<StartRamp> start_ramp;  // unless kNone
  bool ramp_meets = true;               // the ramp's figure within the limit
};

// The runtime plan of `plan` (PlanForGrid over `candidates` for `job`,
// `frontier` the one they came from: its all-max-clock plan gives the
// clocks waits are held at). nullopt when no pair meets the limits without
// a floor. Throws model::InputError naming StartRampRequest::<field> for a
// bad ramp.
std::optional<GridRuntimePlan> PlanGridRuntime(const schedule::Schedule& schedule,
                                               const model::Profile& profile, const JobSpec& job,
                                               const solver::Frontier& frontier,
                                               const std::vector<CandidatePlan>& candidates,
                                               const GridPlan& plan,
                                               const GridRuntimePlanRequest& request);

}  // namespace joulepipe::sim

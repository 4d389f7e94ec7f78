// Power-limit plans: one power limit per pipeline stage (GPU) instead of one
// SM clock per instruction, for clusters that let jobs set power limits but
// not lock clocks (issue 15, item 4).
//
// The model, from the profile alone. At default clocks the board's power
// controller lowers the SM clock until the GPU's power meets the limit, so an
// instruction runs at the highest profiled clock whose mean power (energy /
// time of its row) is within the limit; one whose power at its highest clock
// is within already runs unaffected. One effective clock per instruction:
// the board acts within milliseconds, and Zeus's measured global power-limit
// sweeps are fitted best that way (physics::kClassCapShare's note). So under
// limit L stage s's forwards and backwards run at clocks f_fwd(L), f_bwd(L),
// which differ: a backward draws more, and is capped first.
//
// The options of a stage are the distinct tuples of those clocks (one per
// profile row the GPU runs: two, or 2V for interleaved profiles with a row per
// virtual stage) over all limits, each with the limit in the middle of the
// range of limits that gives it, so that a board a few watts off still
// lands on it. Option 0 is the GPU's default limit: nothing is set, every
// row at its highest clock, the profile as measured.
//
// The search (exact figures throughout: the critical path over the rows'
// times and the energy rule of model/energy.hpp, as EvaluateClocks):
//   * a ratio path: from every stage at option 0, the move (one stage to a
//     lower limit) that saves the most energy per second added, moves that
//     add no time first;
//   * for each requested deadline and `grid_deadlines` deadlines spread
//     between the fastest and the slowest point of the path: from option 0,
//     the move that saves the most energy while staying within the deadline,
//     until none does; at the requested deadlines (and the defaults' time)
//     then pair moves, one stage up and another down, while one saves.
// Moves go from a stage's option j to j+1, j+2, j+4, ... (a jump can cross a
// step where one row's clock drops but the next one saves more). The
// frontier is every visited point, Pareto-filtered. It is a heuristic; the
// tests compare it with exhaustive enumeration on small pipelines.
#pragma once

#include <functional>

#include <atomic>
#include <cstdint>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::solver {

// One power limit a stage (GPU) may get. watts = 0 is the default limit
// (nothing set).
struct LimitOption {
  double watts = 0;
  // The clock of each of the GPU's profile rows under it, in the order of
  // LimitFrontier::rows[stage].
  std::vector<int> mhz;
};

struct LimitPoint {
  double time_s = 0;               // exact iteration time
  double energy_j = 0;             // exact iteration energy, all stages, GPU only
  std::vector<double> watts;       // per stage; 0 = the default limit
  std::vector<std::uint16_t> mhz;  // the effective clock per schedule node id
};

struct LimitRow {
  int profile_stage = 0;
  model::Kind kind = model::Kind::kForward;
};

struct LimitFrontier {
  LimitPoint defaults;                            // every stage at its default limit
  std::vector<LimitPoint> points;                 // ascending time, strictly descending energy
  std::vector<std::vector<LimitRow>> rows;        // [stage] -> the profile rows its GPU runs
  std::vector<std::vector<LimitOption>> options;  // [stage] -> options, highest limit first
  long evaluations = 0;                           // plans evaluated

  // Least-energy point whose time is <= time_s, or nullptr.
  const LimitPoint* BestWithin(double time_s) const;
};

struct LimitPlanOptions {
  double p_block_w = 0;  // GPU power while blocked (W), >= 0
  // The lowest limit the GPU accepts (W); limits below are never chosen.
  // 0 = no floor but the profile's: every row must have a clock within the
  // limit (below its lowest clock's power the profile says nothing).
  double min_limit_w = 0;
  // The highest limit the GPU accepts (W); options above are dropped (the
  // board would clamp them). 0 = no ceiling.
  double max_limit_w = 0;
  std::vector<double> deadlines_s;            // deadlines to plan for exactly (each > 0)
  int grid_deadlines = 16;                    // more deadlines, evenly spread (>= 0)
  const std::atomic<bool>* cancel = nullptr;  // once true: model::Cancelled
};

// The clock a profile row runs at under `watts`: the highest clock whose mean
// power is <= watts, or 0 when none is. `points` as Profile::Points returns.
int ClockUnderLimit(const std::vector<model::ClockPoint>& points, double watts);

// Throws model::InputError if the profile lacks a row the schedule needs or
// an option is out of range (naming LimitPlanOptions fields).
LimitFrontier SolveLimitFrontier(const schedule::Schedule& schedule, const model::Profile& profile,
                                 const LimitPlanOptions& options);

// The plan file of a point: power_limits_w = the point's limits, each
// instruction's "frequency" the clock its limit is predicted to give,
// predicted = the point's exact figures.
model::Plan ToPlan(const schedule::Schedule& schedule, const LimitPoint& point);

// The task "plan power limits", one call for every front end (`joulepipe
// plan --lever power-limit`, Python's plan_power_limits): the request's
// schedule, P_block and goal; the GPU's accepted range of limits; the limit
// plan the goal asks for, and, to compare, the clock plan of the same
// request. Goals: the least energy within the deadline (1 + slowdown) x T,
// or the least energy at any speed (Goal::kLeastEnergy); budgets and host
// power are refused (Objective::energy_budget_j, Objective::power_budget_w,
// Objective::host_power_w).
struct PowerLimitRequest {
  PlanRequest plan;
  double min_limit_w = 0;      // LimitPlanOptions::min_limit_w: 0 = no floor
  double max_limit_w = 0;      // LimitPlanOptions::max_limit_w: 0 = no ceiling
  bool compare_clocks = true;  // also solve the clock plan (PipelinePlan) of `plan`
};

struct PowerLimitPlan {
  PowerLimitRequest request;
  // The clock plan of request.plan: prepared (baseline, deadline, P_block,
  // schedule) always, solved (frontier, chosen) when compare_clocks.
  PipelinePlan clocks;
  LimitFrontier limits;      // empty until solved
  std::size_t chosen = 0;    // into limits.points; the defaults (0) when nothing else fits
  double solve_seconds = 0;  // the limit frontier's
};

// Throws model::InputError naming the field: the objective (above), the
// limits (finite, >= 0, min <= max when both are set), and what
// CheckPlanRequest checks.
void CheckPowerLimitRequest(const PowerLimitRequest& request);

// The task, the one call every front end makes: the cheap half first
// (every input check, the baseline, the deadline, P_block), then
// `prepared` hears the prepared plan (a front end checks its outputs there
// and says what it is about to solve, so that nothing is solved for an
// output that cannot be written), then the expensive half (the limit
// frontier, the clock plan when compare_clocks, the chosen point).
// request.plan.cancel stops both solves (model::Cancelled).
PowerLimitPlan PlanPowerLimits(const model::Profile& profile, const PowerLimitRequest& request,
                               const std::function<void(const PowerLimitPlan&)>& prepared = {});

}  // namespace joulepipe::solver

// The iteration time–energy Pareto frontier of a pipeline schedule.
//
// Input: a schedule (its DAG), a profile (per stage and kind: clock -> time,
// energy) and P_block. Output: for every achievable iteration time, on a grid
// of `resolution_s`, a plan (one real clock per instruction) of least energy
// found, with its EXACT time and energy (critical path over real, unquantised
// times; energy as docs/architecture.md defines it). Dominated points are dropped.
//
// How (docs/solver.md has the details):
//   1. Each (stage, kind)'s clocks become a convex cost hull (cost_hull.hpp).
//   2. The linear relaxation (every instruction may take any duration on its
//      hull) is solved exactly for ALL deadlines at once by parametric
//      min-cut crashing (Phillips–Dessouky / Fulkerson) with exact step
//      lengths: no time quantisation, no curve fitting. Its curve is a lower
//      bound on what any discrete plan can reach.
//   3. For each grid deadline the relaxed durations are snapped to real
//      clocks (the faster hull vertex) and slack is reclaimed greedily
//      (instructions with float move to slower Pareto clocks) without
//      exceeding that deadline; the plan is then evaluated exactly.
//   4. Requested deadlines (and a sample of the grid) are refined further:
//      best-ratio greedy slack filling and a timetable local search, which
//      see the real clocks where the convex hull misprices them; requested
//      ones (always including the max-clock time) also get a large-
//      neighbourhood search (reset a window, refill greedily).
//   5. The least-energy end gets that search too, from the least-energy
//      point up to the slowest useful makespan, so the least-energy point is
//      the same whatever deadlines were requested.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::solver {

struct Options {
  double p_block_w = 0;        // GPU power while blocked (W), >= 0
  double resolution_s = 1e-3;  // spacing of the deadline grid (s), > 0
  // Extra deadlines (s) to plan for exactly, e.g. (1 + slowdown) * T_maxclock.
  // Each also gets the refinement below.
  std::vector<double> extra_deadlines_s;
  // > 0: the grid stops at this deadline (s); slower plans are not rounded
  // (requested deadlines above it are still planned). 0: up to the slowest
  // useful plan.
  double max_deadline_s = 0;
  // Grid deadlines, evenly spread, that get the refinement too: greedy slack
  // filling (from the snapped relaxation and from all-fastest) and timetable
  // local search, keeping the best plan. Costs a few ms each on big
  // pipelines, so the count is max(refined_samples, refine_budget /
  // instructions): every deadline of a small pipeline, a sample of a big one.
  int refined_samples = 16;
  long refine_budget = 20000;
  // Threads that solve the frontier: the calling thread crashes the
  // relaxation while threads - 1 workers round the grid deadlines it has
  // passed, then joins them (each deadline on its own; the frontier is the
  // same for any count). 0: the hardware's, at most 8, fewer for small
  // solves (instructions x (deadlines + 64 x refined ones) per 500,000).
  int threads = 0;
  // Called from the solving thread as work advances: phase "relaxation" or
  // "rounding", and the fraction of that phase done (0..1). Optional; keep
  // it cheap (it may be called thousands of times).
  std::function<void(const char* phase, double fraction)> progress;
  // Optional. Read wherever progress is reported and at every grid deadline;
  // once true, SolveFrontier throws model::Cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

struct FrontierPoint {
  double time_s = 0;               // exact iteration time
  double energy_j = 0;             // exact iteration energy, all stages, GPU only
  std::vector<std::uint16_t> mhz;  // clock per schedule node id
  // With a knob profile (model/profile.hpp, knob columns): the knob setting
  // per schedule node id, an index into knob_names. Empty when the profile
  // has no knobs (every instruction then uses knob 0, its clock's one
  // point), so plans of clock-only profiles are exactly what they were.
  std::vector<std::uint16_t> knob;
  model::Profile::KnobTable knob_names;
};

// A breakpoint of the relaxation's frontier: no plan with time <= time_s can
// use less than energy_j (between breakpoints the bound is linear).
struct BoundPoint {
  double time_s = 0;
  double energy_j = 0;
};

struct SolveStats {
  int relaxation_steps = 0;  // parametric min-cut steps
  int deadlines = 0;         // grid deadlines rounded to real clocks
  int refined = 0;           // deadlines that got the refinement
  double relaxation_seconds = 0;
  // What the rounding and refinement took after the relaxation ended (with
  // threads > 1 most of it runs alongside the relaxation, and is not here).
  double rounding_seconds = 0;
};

struct Frontier {
  FrontierPoint max_clock;            // every instruction at its highest clock
  std::vector<FrontierPoint> points;  // ascending time, strictly descending energy
  std::vector<BoundPoint> bound;      // ascending time, relaxation frontier
  SolveStats stats;

  // Lower bound on the energy of any plan whose time is <= time_s
  // (+infinity below the fastest achievable time).
  double BoundAt(double time_s) const;

  // Least-energy point whose time is <= time_s, or nullptr.
  const FrontierPoint* BestWithin(double time_s) const;
};

// Throws model::InputError if the profile lacks a (stage, kind) the schedule
// needs or options are invalid; model::Cancelled if options.cancel is raised.
Frontier SolveFrontier(const schedule::Schedule& schedule, const model::Profile& profile,
                       const Options& options);

// Exact time and energy of a clock assignment (clock per node id) by critical
// path. Every clock must exist in the profile. `knob` (per node id, indices
// into profile.knob_settings()) picks the point at each clock; empty = knob
// 0 everywhere (Profile::Find).
struct Evaluation {
  double time_s = 0;
  double energy_j = 0;
};
Evaluation EvaluateClocks(const schedule::Schedule& schedule, const model::Profile& profile,
                          double p_block_w, const std::vector<std::uint16_t>& mhz,
                          const std::vector<std::uint16_t>& knob = {});

// The plan file for a point (predicted = the point's exact figures; each
// instruction's knobs named from point.knob_names).
model::Plan ToPlan(const schedule::Schedule& schedule, const FrontierPoint& point);

}  // namespace joulepipe::solver

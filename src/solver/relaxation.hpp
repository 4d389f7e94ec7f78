// The linear relaxation of the frontier problem, solved for every deadline.
//
// Each activity may take any duration on its cost hull (a convex, piecewise
// linear, decreasing function of duration). Starting from the cheapest
// durations (makespan T_max), the makespan is reduced step by step: each step
// takes the minimum cut of the critical subnetwork (arcs leaving the source
// side are shortened at their left slope, arcs entering it lengthened at
// their right slope) and moves by the largest amount that keeps that cut
// optimal: until an activity reaches a hull vertex or a non-critical path
// becomes critical (found by Newton iteration on the makespan). Every step
// is exact; the resulting curve is the optimal relaxed cost for every T.
#pragma once

#include <functional>
#include <vector>

#include "activity_graph.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "min_cut.hpp"

namespace joulepipe::solver {

struct RelaxationStep {
  double t_before = 0;          // makespan when the step starts
  double delta = 0;             // makespan reduction over the step
  std::vector<int> shortened;   // positions whose duration falls by `delta`
  std::vector<int> lengthened;  // positions whose duration grows by `delta`
};

struct Relaxation {
  std::vector<double> initial;        // durations at T_max (every activity at its cheapest vertex)
  std::vector<RelaxationStep> steps;  // makespan decreasing
  std::vector<BoundPoint> curve;      // (T, relaxed energy) at T_max and after each step
  double t_min = 0;                   // makespan after the last step
};

// `min_cut`: nullptr (the default and what the frontier uses) solves each
// step's cut warm-started from the last step's flow (WarmMinCut); a function
// solves every step's series-contracted network from scratch with it (the
// LEMON oracle in tests, the cold Dinic baseline in bench_max_flow). All give
// the same cuts. `progress`, if set, gets the fraction of the makespan range
// crashed so far. `on_step`, if set, sees each step as soon as it is found
// (the same step that ends up in Relaxation::steps), so rounding can follow
// the crashing down the makespan range while it runs.
Relaxation SolveRelaxation(const ActivityGraph& g, double p_block_w,
                           MinCutFunction min_cut = nullptr,
                           const std::function<void(double)>& progress = {},
                           const std::function<void(const RelaxationStep&)>& on_step = {});

// The durations the relaxation starts from (every activity at its cheapest
// hull vertex: Relaxation::initial, makespan T_max) and the fastest ones
// (every activity at its fastest vertex: the makespan the crashing ends at).
std::vector<double> CheapestDurations(const ActivityGraph& g);
std::vector<double> FastestDurations(const ActivityGraph& g);

// Durations at makespan `t` within `step` given the durations at its start.
void DurationsWithin(const RelaxationStep& step, const std::vector<double>& at_start, double t,
                     std::vector<double>& out);

}  // namespace joulepipe::solver

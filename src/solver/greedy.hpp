// Greedy slack filling: a second, independent way to turn a deadline into a
// plan, strong exactly where rounding the relaxation is weak.
//
// Start with every activity at its fastest clock (or from a given plan, e.g.
// the relaxation snapped down to hull vertices). Repeatedly take the move
// that saves the most effective energy per second of float it consumes
// (activity p from its clock to a slower Pareto clock that still fits in p's
// total float), apply it, and update earliest starts forward and latest
// finishes backward from p. Floats only shrink, so a move's ratio only
// falls; a lazy priority queue re-checks the top move before applying it.
//
// The relaxation prices a clock by the convex hull of all clocks; when the
// real clocks sit far above a long hull segment (a flat stretch of the
// measured curve followed by a steep drop), the relaxation's choices round
// badly, while the greedy sees the real clocks and their real ratios.
#pragma once

#include "activity_graph.hpp"
#include "rounding.hpp"

namespace joulepipe::solver {

// `start`: the plan to fill from (Pareto index per position); nullptr for
// every activity at its fastest clock. It must meet the deadline.
// `stop` is checked before each move.
RoundedPlan GreedyFill(const ActivityGraph& g, double p_block_w, double deadline,
                       const std::vector<int>* start = nullptr, const StopCheck& stop = {});

}  // namespace joulepipe::solver

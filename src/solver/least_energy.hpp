// The least-energy end of the frontier, searched the same way whatever a
// command asked for.
//
// Requested deadlines get more search than grid deadlines (grid_rounding.hpp),
// and near the least-energy end the frontier is flat to a few joules, where
// which deadlines were tried decides which plan is least. So the least point
// depended on the command: the demo's straggler deadline (1.2 x T) found a
// plan 1.1 J below what `plan --least-energy` called least on the same
// pipeline. This search takes the grid's own least-energy point (never a
// requested deadline's, so the start is the same for every command that
// solves the pipeline on that grid) and tries the deadlines just above it,
// where slack the grid left unused is found: each is rounded from the
// relaxation, filled greedily from the snapped relaxation and polished, as a
// sampled grid deadline is.
#pragma once

#include <vector>

#include "activity_graph.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "rounding.hpp"
#include "step_feed.hpp"

namespace joulepipe::solver {

// The deadlines tried: the anchor's time x (1 + k x kLeastEnergyStep), k = 0
// .. kLeastEnergyDeadlines - 1 (up to 0.7 % slower), capped at the slowest
// useful makespan. On the demo's pipeline the least plan lies 0.4 % above
// the grid's (bench/ and docs/solver.md).
inline constexpr int kLeastEnergyDeadlines = 8;
inline constexpr double kLeastEnergyStep = 1e-3;

// `anchor` is the grid's least-energy point; `slowest_s` the slowest useful
// makespan; `feed` holds the finished relaxation (its steps) and `initial`
// its starting durations. Returns the best plan found if it uses less
// energy than `anchor`, else nothing.
std::vector<RoundedPlan> SearchLeastEnergy(const ActivityGraph& g, double p_block_w, StepFeed& feed,
                                           const std::vector<double>& initial,
                                           const FrontierPoint& anchor, double slowest_s,
                                           const StopCheck& stop);

}  // namespace joulepipe::solver

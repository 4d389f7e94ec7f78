// Large-neighbourhood search for one deadline's plan: reset a window of
// consecutive activities (in topological order, which follows time) to their
// fastest clocks, refill the freed float by best-ratio greedy filling, and
// keep the result if it uses less energy. Windows of several sizes slide
// over the whole iteration. Used on the deadlines a user asked for (the
// chosen plan), where a few hundred milliseconds buy the last tenths of a
// percent; deterministic.
#pragma once

#include "activity_graph.hpp"
#include "rounding.hpp"

namespace joulepipe::solver {

// Improves `plan` (which meets `deadline`) in place; never makes it worse.
// `stop` is checked by each greedy filling and polish it runs.
void NeighbourhoodSearch(const ActivityGraph& g, double p_block_w, double deadline,
                         RoundedPlan& plan, int rounds = 2, const StopCheck& stop = {});

}  // namespace joulepipe::solver

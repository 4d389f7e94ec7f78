// The LEMON min-cut oracle: test-only (test_solver, bench_max_flow); the
// production library does not link LEMON.
#pragma once

#include <vector>

#include "min_cut.hpp"

namespace joulepipe::solver {

// The textbook two-phase method with LEMON's push-relabel Preflow: a flow
// meeting every lower bound (super source/sink, t->s arc), then a maximum
// flow in its residual network. Its `feasible` is the stricter "a flow meets
// every lower bound"; where one does, value and cut agree with the above.
// Kept to cross-check in tests (it was 20-60x slower on the solver's networks).
CutResult MinCutWithLowerBoundsLemon(int num_nodes, int source, int sink,
                                     const std::vector<CutArc>& arcs);

}  // namespace joulepipe::solver

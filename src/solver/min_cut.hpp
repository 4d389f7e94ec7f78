// Minimum s-t cut in a network whose arcs carry lower and upper bounds.
//
// The cut value of a partition (X, rest) with s in X, t not in X is
//   sum of upper bounds of arcs X -> rest  -  sum of lower bounds of arcs rest -> X.
// In time–cost tradeoff terms: shortening the arcs that leave X (at their
// `upper` marginal cost) and lengthening those that enter X (refunding their
// `lower` marginal gain) shortens every s-t path by the same amount, and the
// minimum cut is the cheapest such change.
//
// `feasible` is false when some s-t cut has a negative value: shortening
// would then save energy, which cannot happen at an optimal relaxed point,
// so the solver stops and treats it as round-off.
#pragma once

#include <vector>

namespace joulepipe::solver {

inline constexpr double kInfiniteCapacity = 1e13;

struct CutArc {
  int from = 0;
  int to = 0;
  double lower = 0;  // >= 0
  double upper = 0;  // >= lower; kInfiniteCapacity for "cannot be cut"
};

struct CutResult {
  bool feasible = true;           // false: no flow meets the lower bounds (a cut of negative value)
  bool finite = true;             // false: every cut crosses an arc of infinite capacity
  double value = 0;               // the minimum cut value (the max flow with lower bounds)
  std::vector<char> source_side;  // node -> 1 if on the source side of the cut
};

// With Dinic's algorithm (max_flow.hpp); what the solver uses.
CutResult MinCutWithLowerBounds(int num_nodes, int source, int sink,
                                const std::vector<CutArc>& arcs);

// The signature of a minimum-cut implementation: the relaxation takes one
// (tests and bench_max_flow pass the LEMON oracle, tests/solver/oracle).
using MinCutFunction = CutResult (*)(int num_nodes, int source, int sink,
                                     const std::vector<CutArc>& arcs);

}  // namespace joulepipe::solver

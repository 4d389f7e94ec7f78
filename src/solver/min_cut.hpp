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

#include "max_flow.hpp"

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

// Minimum cuts (as MinCutWithLowerBounds) of a sequence of networks that
// differ a little from one to the next: the relaxation's steps, where the
// critical subnetwork only grows and a few bounds change per step. Each arc
// carries a key in [0, num_keys) that names the same arc in every network of
// the sequence (at most one arc per key per network). The flow each solve
// leaves on a key's arc is the next solve's starting flow, clamped into the
// arc's new bounds, so a solve only pushes the difference.
//
// Why it is exact: for ANY flow f0 within the bounds (conservation not
// needed), the cut value of (X, rest) equals
//   cap_R(X) - sum over v in X of e_v,   e_v = f0 into v - f0 out of v,
// where R is f0's residual network (upper - f0 forward, f0 - lower backward).
// A node with e_v < 0 becomes an arc v -> sink of capacity -e_v, one with
// e_v > 0 an arc source -> v of capacity e_v less the constant e_v; the
// source's own term is a constant. One maximum flow on that network gives the
// minimum cut, and the nodes reachable from the source in its residual are
// the same for every maximum flow (the minimal minimum cut), so the cuts, and
// with them the relaxation, are those of the cold solve.
class WarmMinCut {
 public:
  explicit WarmMinCut(int num_keys) : flow_(num_keys, 0.0) {}

  CutResult Solve(int num_nodes, int source, int sink, const std::vector<CutArc>& arcs,
                  const std::vector<int>& keys);

 private:
  std::vector<double> flow_;  // per key: the flow the last solve left on its arc
  FlowNetwork net_;           // scratch, kept for its allocations
  std::vector<double> excess_;
  std::vector<int> ids_;
};

// The signature of a minimum-cut implementation: the relaxation takes one
// (tests and bench_max_flow pass the LEMON oracle, tests/solver/oracle).
using MinCutFunction = CutResult (*)(int num_nodes, int source, int sink,
                                     const std::vector<CutArc>& arcs);

}  // namespace joulepipe::solver

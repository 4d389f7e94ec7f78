#include "min_cut.hpp"

#include <algorithm>

#include "max_flow.hpp"

namespace joulepipe::solver {

// One maximum flow instead of the textbook two phases. For an arc u -> v
// crossing forward the cut pays `upper`, crossing backward it refunds
// `lower`. Writing the refund as lower * ([u in X] - [v in X]) minus
// lower * [u in X, v not in X] turns every arc into a plain arc of capacity
// upper - lower plus a per-node term b_v * [v in X], where
// b_v = (lower bounds leaving v) - (lower bounds entering v). A positive b_v
// is an arc v -> t of capacity b_v (paid when v is on the source side); a
// negative one is an arc s -> v of capacity -b_v (paid when v is not) less
// the constant -b_v. The source is always in X and the sink never, so
// cut(X) = cut'(X) + b_s + sum of the other negative b_v.
CutResult MinCutWithLowerBounds(int num_nodes, int source, int sink,
                                const std::vector<CutArc>& arcs) {
  FlowNetwork net(num_nodes);
  std::vector<double> b(num_nodes, 0.0);
  for (const CutArc& a : arcs) {
    net.AddArc(a.from, a.to, a.upper >= kInfiniteCapacity ? kInfiniteCapacity : a.upper - a.lower);
    b[a.from] += a.lower;
    b[a.to] -= a.lower;
  }
  double constant = b[source], scale = 0;
  for (int v = 0; v < num_nodes; ++v) {
    if (v == source || v == sink) continue;
    if (b[v] > 0) {
      net.AddArc(v, sink, b[v]);
    } else if (b[v] < 0) {
      net.AddArc(source, v, -b[v]);
      constant += b[v];
    }
    scale += b[v] > 0 ? b[v] : -b[v];
  }
  CutResult result;
  const double flow = net.MaxFlow(source, sink);
  result.finite = flow < kInfiniteCapacity / 10;
  result.value = flow + constant;
  // A negative minimum cut would shorten the project and save energy at once:
  // impossible at an optimal point, so it only flags bad input or round-off.
  result.feasible = result.value >= -1e-9 * (1 + scale);
  result.source_side = net.Reachable(source);
  return result;
}

CutResult WarmMinCut::Solve(int num_nodes, int source, int sink, const std::vector<CutArc>& arcs,
                            const std::vector<int>& keys) {
  FlowNetwork& net = net_;
  net.Reset(num_nodes);
  excess_.assign(num_nodes, 0.0);
  ids_.resize(arcs.size());
  double scale = 0;
  for (size_t i = 0; i < arcs.size(); ++i) {
    const CutArc& a = arcs[i];
    double& f = flow_[keys[i]];
    f = std::clamp(f, a.lower, a.upper);
    excess_[a.to] += f;
    excess_[a.from] -= f;
    const bool infinite = a.upper >= kInfiniteCapacity;
    ids_[i] = net.AddArc(a.from, a.to, infinite ? kInfiniteCapacity : a.upper - f, f - a.lower);
    scale += 2 * a.lower;  // the tolerance the cold solve's lower-bound terms give
  }
  double constant = -excess_[source];
  for (int v = 0; v < num_nodes; ++v) {
    if (v == source || v == sink) continue;
    if (excess_[v] > 0) {
      net.AddArc(source, v, excess_[v]);
      constant -= excess_[v];
    } else if (excess_[v] < 0) {
      net.AddArc(v, sink, -excess_[v]);
    }
  }
  CutResult result;
  const double flow = net.MaxFlow(source, sink);
  for (size_t i = 0; i < arcs.size(); ++i) flow_[keys[i]] += net.Flow(ids_[i]);
  result.finite = flow < kInfiniteCapacity / 10;
  result.value = flow + constant;
  result.feasible = result.value >= -1e-9 * (1 + scale);
  result.source_side = net.Reachable(source);
  return result;
}

}  // namespace joulepipe::solver

#include "min_cut.hpp"

#include "max_flow.hpp"

namespace joulepipe::solver {

CutResult MinCutWithLowerBounds(int num_nodes, int source, int sink,
                                const std::vector<CutArc>& arcs) {
  CutResult result;
  // Phase 1: a flow meeting every lower bound. Subtracting the lower bounds
  // leaves node imbalances for a super source / super sink to absorb; the
  // t->s arc lets s-t flow circulate.
  const int super_source = num_nodes, super_sink = num_nodes + 1;
  FlowNetwork net(num_nodes + 2);
  std::vector<double> imbalance(num_nodes, 0.0);
  for (const CutArc& a : arcs) {
    net.AddArc(a.from, a.to, a.upper >= kInfiniteCapacity ? kInfiniteCapacity : a.upper - a.lower);
    imbalance[a.to] += a.lower;
    imbalance[a.from] -= a.lower;
  }
  const int back = net.AddArc(sink, source, kInfiniteCapacity);
  std::vector<int> helpers;
  double required = 0;
  for (int v = 0; v < num_nodes; ++v) {
    if (imbalance[v] > 0) {
      helpers.push_back(net.AddArc(super_source, v, imbalance[v]));
      required += imbalance[v];
    } else if (imbalance[v] < 0) {
      helpers.push_back(net.AddArc(v, super_sink, -imbalance[v]));
    }
  }
  double circulating = 0;
  if (required > 0) {
    const double sent = net.MaxFlow(super_source, super_sink);
    if (sent < required - 1e-7 * (1 + required)) {
      result.feasible = false;
      return result;
    }
    circulating = net.Flow(back);
  }
  // Phase 2: drop the helper arcs and augment s -> t in what is left; the
  // source side of the minimum cut is what s still reaches.
  net.Freeze(back);
  for (int h : helpers) net.Freeze(h);
  result.value = circulating + net.MaxFlow(source, sink);
  result.finite = result.value < kInfiniteCapacity / 10;
  result.source_side = net.Reachable(source);
  result.source_side.resize(num_nodes);
  return result;
}

}  // namespace joulepipe::solver

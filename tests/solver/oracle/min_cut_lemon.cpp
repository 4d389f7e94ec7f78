#include "min_cut_lemon.hpp"

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>

namespace joulepipe::solver {

namespace {

using Graph = lemon::SmartDigraph;
using Capacity = Graph::ArcMap<double>;
using MaxFlow = lemon::Preflow<Graph, Capacity>;

// Absolute slack on flow balance; costs are in joules per second and the
// largest finite capacities are ~1e6, so 1e-7 is far below any real cost.
constexpr double kFlowEpsilon = 1e-7;

}  // namespace

CutResult MinCutWithLowerBoundsLemon(int num_nodes, int source, int sink,
                                     const std::vector<CutArc>& arcs) {
  CutResult result;

  // Phase 1: a flow meeting every lower bound. Subtracting the lower bound
  // from each arc leaves node imbalances that a super source / super sink
  // must absorb; the t->s arc lets s-t flow circulate.
  Graph g;
  g.reserveNode(num_nodes + 2);
  g.reserveArc(static_cast<int>(arcs.size()) + num_nodes + 1);
  for (int i = 0; i < num_nodes + 2; ++i) g.addNode();
  const Graph::Node super_source = g.nodeFromId(num_nodes);
  const Graph::Node super_sink = g.nodeFromId(num_nodes + 1);
  Capacity cap(g);
  std::vector<double> imbalance(num_nodes, 0.0);
  std::vector<Graph::Arc> arc_of(arcs.size());
  double required = 0;
  for (size_t k = 0; k < arcs.size(); ++k) {
    const CutArc& a = arcs[k];
    arc_of[k] = g.addArc(g.nodeFromId(a.from), g.nodeFromId(a.to));
    cap[arc_of[k]] = a.upper >= kInfiniteCapacity ? kInfiniteCapacity : a.upper - a.lower;
    imbalance[a.to] += a.lower;
    imbalance[a.from] -= a.lower;
  }
  const Graph::Arc back = g.addArc(g.nodeFromId(sink), g.nodeFromId(source));
  cap[back] = kInfiniteCapacity;
  for (int v = 0; v < num_nodes; ++v) {
    if (imbalance[v] > 0) {
      cap[g.addArc(super_source, g.nodeFromId(v))] = imbalance[v];
      required += imbalance[v];
    } else if (imbalance[v] < 0) {
      cap[g.addArc(g.nodeFromId(v), super_sink)] = -imbalance[v];
    }
  }
  std::vector<double> flow(arcs.size(), 0.0);
  double circulating = 0;
  if (required > 0) {
    MaxFlow feasible(g, cap, super_source, super_sink);
    feasible.tolerance(lemon::Tolerance<double>(1e-12));
    feasible.run();
    if (feasible.flowValue() < required - kFlowEpsilon * (1 + required)) {
      result.feasible = false;
      return result;
    }
    for (size_t k = 0; k < arcs.size(); ++k) flow[k] = feasible.flow(arc_of[k]);
    circulating = feasible.flow(back);
  }

  // Phase 2: augment s -> t in the residual network of that flow. The source
  // side of the resulting min cut is what s still reaches.
  Graph r;
  r.reserveNode(num_nodes);
  r.reserveArc(2 * static_cast<int>(arcs.size()));
  for (int i = 0; i < num_nodes; ++i) r.addNode();
  Capacity residual(r);
  for (size_t k = 0; k < arcs.size(); ++k) {
    const double width = cap[arc_of[k]];
    const double forward = width - flow[k];
    if (forward > 0)
      residual[r.addArc(r.nodeFromId(arcs[k].from), r.nodeFromId(arcs[k].to))] = forward;
    if (flow[k] > 0)
      residual[r.addArc(r.nodeFromId(arcs[k].to), r.nodeFromId(arcs[k].from))] = flow[k];
  }
  MaxFlow augment(r, residual, r.nodeFromId(source), r.nodeFromId(sink));
  augment.tolerance(lemon::Tolerance<double>(1e-12));
  augment.runMinCut();
  result.value = circulating + augment.flowValue();
  result.finite = result.value < kInfiniteCapacity / 10;
  result.source_side.assign(num_nodes, 0);
  for (int v = 0; v < num_nodes; ++v)
    result.source_side[v] = augment.minCut(r.nodeFromId(v)) ? 1 : 0;
  return result;
}

}  // namespace joulepipe::solver

// Dinic's maximum flow on a residual network with double capacities.
//
// Why not LEMON's Preflow: the solver's networks are critical subgraphs of
// pipeline DAGs, long chains joined by arcs of "infinite" capacity. Push-
// relabel floods those arcs with excess that must then drain back; inside
// the relaxation it measured 1.2-12x slower than augmenting along shortest
// paths, the gap growing with the pipeline (bench_max_flow prints both).
#pragma once

#include <vector>

namespace joulepipe::solver {

class FlowNetwork {
 public:
  explicit FlowNetwork(int nodes = 0) { Reset(nodes); }

  void Reset(int nodes);
  // Adds u -> v with capacity c and its reverse residual arc v -> u, whose
  // capacity is `reverse` (0 for a plain arc; a warm start gives it the flow
  // already on the arc above its lower bound, which may be cancelled).
  // Returns the arc id; Flow(id) is the net flow pushed over it since.
  int AddArc(int u, int v, double capacity, double reverse = 0);

  // Sends as much additional flow as possible from s to t; returns the amount.
  double MaxFlow(int s, int t);

  double Flow(int arc) const { return flow_[arc]; }
  // Removes an arc and its reverse from the residual network (its flow stays
  // recorded but can no longer be pushed or cancelled).
  void Freeze(int arc);
  // Nodes reachable from s over arcs with positive residual capacity.
  std::vector<char> Reachable(int s);
  int num_nodes() const { return n_; }

 private:
  struct Arc {
    int to;
    double residual;
  };
  void Build();
  bool Levels(int s, int t);
  double Augment(int s, int t);

  int n_ = 0;
  bool built_ = false;
  std::vector<int> from_;
  std::vector<Arc> arcs_;     // arc 2k is forward, 2k+1 its reverse
  std::vector<double> flow_;  // per forward arc
  std::vector<int> first_, order_, level_, current_;
  std::vector<int> path_;  // Augment's walk: arc ids from s
  // The source of the last MaxFlow while its final BFS levels still
  // describe the residual network (-1 after any change): Reachable reuses them.
  int reachable_from_ = -1;
};

}  // namespace joulepipe::solver

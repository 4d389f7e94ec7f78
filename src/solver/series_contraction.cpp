#include "series_contraction.hpp"

namespace joulepipe::solver {

void ContractSeries(int num_nodes, int source, int sink, std::vector<NetworkArc>& arcs) {
  std::vector<int> in_degree(num_nodes, 0), out_degree(num_nodes, 0);
  std::vector<int> in_arc(num_nodes, -1), out_arc(num_nodes, -1);
  for (int k = 0; k < static_cast<int>(arcs.size()); ++k) {
    ++out_degree[arcs[k].from];
    ++in_degree[arcs[k].to];
    out_arc[arcs[k].from] = k;
    in_arc[arcs[k].to] = k;
  }
  for (int v = 0; v < num_nodes; ++v) {
    if (v == source || v == sink || in_degree[v] != 1 || out_degree[v] != 1) continue;
    const int a = in_arc[v], b = out_arc[v];
    if (a == b) continue;  // a self-loop cannot occur in a DAG; be safe
    NetworkArc& first = arcs[a];
    NetworkArc& second = arcs[b];
    if (second.upper < first.upper) {
      first.upper = second.upper;
      first.shorten = second.shorten;
    }
    if (second.lower > first.lower) {
      first.lower = second.lower;
      first.lengthen = second.lengthen;
    }
    if (first.lower > first.upper) first.lower = first.upper;  // round-off only
    first.to = second.to;
    // `first` now enters the old head of `second`; keep in_arc exact for
    // nodes that may still be contracted.
    if (in_arc[second.to] == b) in_arc[second.to] = a;
    second.from = -1;
  }
}

}  // namespace joulepipe::solver

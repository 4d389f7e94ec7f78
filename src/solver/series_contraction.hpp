// Series contraction of a critical network before its minimum cut.
//
// Critical subgraphs of pipeline schedules are mostly chains: an event with
// one incoming and one outgoing arc joins two arcs in series. A cut crosses a
// series pair at most once usefully, so the pair behaves like one arc whose
// upper bound is the smaller upper bound (shorten the cheaper member) and
// whose lower bound is the larger lower bound (lengthen the member that
// refunds most). This is exact at an optimal relaxed point, where within a
// chain no member's refund exceeds another's cost (otherwise trading one for
// the other would save energy at the same makespan).
#pragma once

#include <vector>

namespace joulepipe::solver {

struct NetworkArc {
  int from = 0;
  int to = 0;
  double lower = 0;
  double upper = 0;
  int shorten = -1;   // activity shortened when the arc is cut forward (-1: none)
  int lengthen = -1;  // activity lengthened when cut backward (-1: none)
};

// Merges series pairs through every node other than `source` and `sink`
// that has exactly one incoming and one outgoing arc. Merged-away arcs get
// from = -1. Runs in O(nodes + arcs).
void ContractSeries(int num_nodes, int source, int sink, std::vector<NetworkArc>& arcs);

}  // namespace joulepipe::solver

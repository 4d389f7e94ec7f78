#include "neighbourhood_search.hpp"

#include <algorithm>

#include "greedy.hpp"
#include "polish.hpp"

namespace joulepipe::solver {

void NeighbourhoodSearch(const ActivityGraph& g, double p_block_w, double deadline,
                         RoundedPlan& plan, int rounds, const StopCheck& stop) {
  Polisher polisher(g, p_block_w);
  const int n = g.n;
  for (int round = 0; round < rounds; ++round) {
    bool improved = false;
    for (int parts : {2, 4, 8, 16, 32}) {
      const int width = std::max(1, n / parts);
      // Windows overlap by half so no boundary is always a boundary.
      for (int begin = 0; begin < n; begin += std::max(1, width / 2)) {
        std::vector<int> start = plan.choice;
        for (int p = begin; p < std::min(n, begin + width); ++p) start[p] = 0;
        RoundedPlan candidate = GreedyFill(g, p_block_w, deadline, &start, stop);
        if (candidate.time_s <= deadline && candidate.energy_j < plan.energy_j - 1e-9) {
          plan = std::move(candidate);
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
  polisher.Polish(deadline, plan, 12, stop);
}

}  // namespace joulepipe::solver

#include "least_energy.hpp"

#include <algorithm>

#include "greedy.hpp"
#include "polish.hpp"

namespace joulepipe::solver {

std::vector<RoundedPlan> SearchLeastEnergy(const ActivityGraph& g, double p_block_w, StepFeed& feed,
                                           const std::vector<double>& initial,
                                           const FrontierPoint& anchor, double slowest_s,
                                           const StopCheck& stop) {
  const double from = anchor.time_s;
  const double to = std::max(from, slowest_s);
  // Descending, as a StepCursor walks the relaxation.
  std::vector<double> deadlines;
  for (int k = kLeastEnergyDeadlines - 1; k >= 0; --k) {
    deadlines.push_back(std::min(to, from * (1 + kLeastEnergyStep * k)));
  }
  deadlines.erase(std::unique(deadlines.begin(), deadlines.end()), deadlines.end());
  StepCursor cursor{0, initial};
  std::vector<double> relaxed;
  std::vector<int> snapped;
  Rounder rounder(g, p_block_w);
  Polisher polisher(g, p_block_w);
  RoundedPlan best;
  best.energy_j = anchor.energy_j;
  bool found = false;
  for (double deadline : deadlines) {
    cursor.RelaxedAt(feed, deadline, relaxed);
    RoundedPlan rounded;
    rounder.Round(relaxed, deadline, rounded);
    rounder.Snap(relaxed, snapped);
    RoundedPlan filled = GreedyFill(g, p_block_w, deadline, &snapped, stop);
    for (RoundedPlan* plan : {&rounded, &filled}) {
      if (plan->time_s > deadline) continue;
      polisher.Polish(deadline, *plan, 12, stop);
      if (plan->energy_j < best.energy_j - 1e-9) {
        best = std::move(*plan);
        found = true;
      }
    }
  }
  if (!found) return {};
  return {std::move(best)};
}

}  // namespace joulepipe::solver

// From relaxed durations to a real plan for one deadline.
//
// Snap: every activity takes the hull vertex at or just faster than its
// relaxed duration, so no path gets longer and the makespan stays within the
// deadline. Reclaim: passes in topological order give each activity the
// slowest Pareto clock that still finishes by its latest finish time (computed
// against the deadline), so slack freed by snapping, and float the relaxation
// left unused, turns into energy savings: first capped at one hull segment
// above the snap (spreading slack like the relaxation does), then uncapped. The result never
// exceeds the deadline (up to the snap's tolerance when the relaxation sits exactly on it).
#pragma once

#include <atomic>
#include <vector>

#include "activity_graph.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::solver {

// What stops a long refinement (greedy filling, polishing, the
// neighbourhood search) between two of its moves: the caller's cancel flag
// or the rounder's own stop (another thread failed or was cancelled). Each
// of those runs O(n) per move, so on the largest pipelines (a million
// instructions) one call takes hours; without this, a cancelled solve
// waited for it. Raises model::Cancelled; a default StopCheck never stops.
struct StopCheck {
  const std::atomic<bool>* cancel = nullptr;
  const std::atomic<bool>* stopped = nullptr;

  void operator()() const {
    if ((cancel != nullptr && cancel->load(std::memory_order_relaxed)) ||
        (stopped != nullptr && stopped->load(std::memory_order_relaxed))) {
      throw model::Cancelled("the frontier solve was cancelled");
    }
  }
};

struct RoundedPlan {
  std::vector<int> choice;  // position -> index into its hull's pareto list
  double time_s = 0;        // exact makespan
  double energy_j = 0;      // exact energy (instructions + blocking), all stages
};

// Fills plan.time_s and plan.energy_j from plan.choice: critical path over
// the chosen clocks' times and the exact energy (instructions + blocking).
void EvaluateChoice(const ActivityGraph& g, double p_block_w, RoundedPlan& plan);

class Rounder {
 public:
  Rounder(const ActivityGraph& g, double p_block_w) : g_(g), p_block_(p_block_w) {}

  void Round(const std::vector<double>& relaxed, double deadline, RoundedPlan& out);

  // Just the snap: each activity at the hull vertex at or below its relaxed
  // duration (a plan within the relaxation's makespan).
  void Snap(const std::vector<double>& relaxed, std::vector<int>& choice);

 private:
  void Reclaim(double deadline, const std::vector<double>* cap, RoundedPlan& out);

  const ActivityGraph& g_;
  const double p_block_;
  std::vector<double> d_, cap_, lf_, ef_;
};

}  // namespace joulepipe::solver

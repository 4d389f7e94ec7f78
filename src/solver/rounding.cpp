#include "rounding.hpp"

#include <algorithm>

namespace joulepipe::solver {

void Rounder::Round(const std::vector<double>& relaxed, double deadline, RoundedPlan& out) {
  const int n = g_.n;
  out.choice.resize(n);
  d_.resize(n);
  // Snap to the hull vertex at or below the relaxed duration.
  for (int p = 0; p < n; ++p) {
    const CostHull& h = g_.hulls[g_.hull_of[p]];
    const double limit = relaxed[p] + 1e-12 * (1 + relaxed[p]);
    int k = static_cast<int>(h.vertices.size()) - 1;
    while (k > 0 && h.vertices[k].time_s > limit) --k;
    out.choice[p] = h.vertex_in_pareto[k];
    d_[p] = h.vertices[k].time_s;
  }

  // Reclaim slack in topological order. Latest finishes are computed once
  // from the snapped durations; an activity only grows while it still ends by
  // its latest finish, and its successors' latest finishes assumed no more
  // than their snapped durations, which they in turn only grow within theirs,
  // so every activity keeps finishing by its latest finish.
  LatestFinish(g_, d_, deadline, lf_);
  ef_.resize(n);
  double makespan = 0, energy = 0, busy = 0;
  for (int p = 0; p < n; ++p) {
    double start = 0;
    for (int k = g_.pred_begin[p]; k < g_.pred_begin[p + 1]; ++k) start = std::max(start, ef_[g_.pred[k]]);
    const std::vector<Option>& options = g_.hulls[g_.hull_of[p]].pareto;
    // Slowest option with start + time <= latest finish (options ascend in time).
    auto it = std::upper_bound(options.begin(), options.end(), lf_[p] - start,
                               [](double room, const Option& o) { return room < o.time_s; });
    int j = static_cast<int>(it - options.begin()) - 1;
    while (j > 0 && start + options[j].time_s > lf_[p]) --j;
    if (j < 0) j = 0;
    out.choice[p] = j;
    ef_[p] = start + options[j].time_s;
    makespan = std::max(makespan, ef_[p]);
    energy += options[j].energy_j;
    busy += options[j].time_s;
  }
  out.time_s = makespan;
  out.energy_j = energy + p_block_ * (g_.num_stages * makespan - busy);
}

}  // namespace joulepipe::solver

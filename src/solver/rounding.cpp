#include "rounding.hpp"

#include <algorithm>
#include <limits>

#include "joulepipe/model/energy.hpp"

namespace joulepipe::solver {

void EvaluateChoice(const ActivityGraph& g, double p_block_w, RoundedPlan& plan) {
  std::vector<double> finish(g.n);
  double makespan = 0, energy = 0, busy = 0;
  for (int p = 0; p < g.n; ++p) {
    double start = 0;
    for (int k = g.pred_begin[p]; k < g.pred_begin[p + 1]; ++k)
      start = std::max(start, finish[g.pred[k]]);
    const Option& o = g.hulls[g.hull_of[p]].pareto[plan.choice[p]];
    finish[p] = start + o.time_s;
    makespan = std::max(makespan, finish[p]);
    energy += o.energy_j;
    busy += o.time_s;
  }
  plan.time_s = makespan;
  plan.energy_j = model::IterationEnergyJ(energy, busy, g.num_stages, makespan, p_block_w);
}

void Rounder::Snap(const std::vector<double>& relaxed, std::vector<int>& choice) {
  const int n = g_.n;
  choice.resize(n);
  d_.resize(n);
  cap_.resize(n);
  // The hull vertex at or below the relaxed duration; the next vertex up is
  // the first reclaim pass's ceiling.
  for (int p = 0; p < n; ++p) {
    const CostHull& h = g_.hulls[g_.hull_of[p]];
    const double limit = relaxed[p] + 1e-12 * (1 + relaxed[p]);
    int k = static_cast<int>(h.vertices.size()) - 1;
    while (k > 0 && h.vertices[k].time_s > limit) --k;
    choice[p] = h.vertex_in_pareto[k];
    d_[p] = h.vertices[k].time_s;
    const bool at_vertex = h.vertices[k].time_s >= relaxed[p] - 1e-12 * (1 + relaxed[p]);
    cap_[p] = at_vertex ? d_[p] : h.vertices[k + 1].time_s;
  }
}

void Rounder::Round(const std::vector<double>& relaxed, double deadline, RoundedPlan& out) {
  Snap(relaxed, out.choice);
  // Pass 1 spreads the slack the snap freed over the activities the
  // relaxation wanted slower, one hull segment at most each: on a chain of
  // equal activities this reproduces the relaxation's mix of the two
  // neighbouring vertices, which convexity says beats giving all slack to a
  // few. Pass 2 hands whatever float is left to anyone.
  Reclaim(deadline, &cap_, out);
  Reclaim(deadline, nullptr, out);
}

// One pass in topological order. Latest finishes come from the current
// durations; an activity only grows while it still ends by its latest finish,
// and its successors' latest finishes assumed no more than their current
// durations, which they in turn only grow within theirs, so every activity
// keeps finishing by its latest finish and the makespan by the deadline.
void Rounder::Reclaim(double deadline, const std::vector<double>* cap, RoundedPlan& out) {
  const int n = g_.n;
  LatestFinish(g_, d_, deadline, lf_);
  ef_.resize(n);
  double makespan = 0, energy = 0, busy = 0;
  for (int p = 0; p < n; ++p) {
    double start = 0;
    for (int k = g_.pred_begin[p]; k < g_.pred_begin[p + 1]; ++k)
      start = std::max(start, ef_[g_.pred[k]]);
    const std::vector<Option>& options = g_.hulls[g_.hull_of[p]].pareto;
    double room = lf_[p] - start;
    if (cap != nullptr) room = std::min(room, (*cap)[p]);
    // Slowest option within the room (options ascend in time), but never
    // faster than the current choice unless the current one no longer fits:
    // max(SlowestWithin(options, room), choice), found by walking up from
    // the choice, which is rarely more than a clock or two from the answer.
    int j = out.choice[p];
    const int last = static_cast<int>(options.size()) - 1;
    while (j < last && options[j + 1].time_s <= room) ++j;
    while (j > 0 && start + options[j].time_s > lf_[p]) --j;
    out.choice[p] = j;
    d_[p] = options[j].time_s;
    ef_[p] = start + d_[p];
    makespan = std::max(makespan, ef_[p]);
    energy += options[j].energy_j;
    busy += options[j].time_s;
  }
  out.time_s = makespan;
  out.energy_j = model::IterationEnergyJ(energy, busy, g_.num_stages, makespan, p_block_);
}

}  // namespace joulepipe::solver

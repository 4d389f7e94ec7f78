#include "polish.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace joulepipe::solver {

namespace {

// Index of the slowest option that fits in `window`, or -1 (options ascend in time).
// Windows are differences of start times, so they carry round-off of a few
// ulps; a clock that fits up to that still fits (the exact re-evaluation at
// the end has the last word).
int SlowestFitting(const std::vector<Option>& options, double window) {
  return SlowestWithin(options, window + 1e-12 * (1 + std::abs(window)));
}

constexpr double kInfeasible = std::numeric_limits<double>::infinity();

}  // namespace

double Polisher::CostWithin(int p, double window) const {
  const std::vector<Option>& options = g_.hulls[g_.hull_of[p]].pareto;
  const int j = SlowestFitting(options, window);
  return j < 0 ? kInfeasible : options[j].cost_j;
}

// Earliest start among p's successors other than `skip`, capped by the deadline.
double Polisher::SuccessorLimit(int p, int skip, double deadline) const {
  double limit = deadline;
  for (int k = g_.succ_begin[p]; k < g_.succ_begin[p + 1]; ++k) {
    const int q = g_.succ[k];
    if (q != skip) limit = std::min(limit, start_[q]);
  }
  return limit;
}

// Whether a start that Move(v) reads changed since v was last evaluated:
// v's own, its predecessors', its successors' and its predecessors' other
// successors' (SuccessorLimit).
bool Polisher::Stale(int v) const {
  const long since = evaluated_at_[v];
  if (since < 0 || changed_at_[v] > since) return true;
  for (int k = g_.succ_begin[v]; k < g_.succ_begin[v + 1]; ++k) {
    if (changed_at_[g_.succ[k]] > since) return true;
  }
  for (int k = g_.pred_begin[v]; k < g_.pred_begin[v + 1]; ++k) {
    const int p = g_.pred[k];
    if (changed_at_[p] > since) return true;
    for (int j = g_.succ_begin[p]; j < g_.succ_begin[p + 1]; ++j) {
      if (changed_at_[g_.succ[j]] > since) return true;
    }
  }
  return false;
}

bool Polisher::Move(int v, double deadline) {
  // A move depends only on the starts Stale() checks: if none changed since
  // v's last evaluation, it would find the same answer, which was "stay"
  // (or v moved, which Stale() sees).
  if (!Stale(v)) return false;
  evaluated_at_[v] = version_;
  const std::vector<Option>& own = g_.hulls[g_.hull_of[v]].pareto;
  const double own_limit = SuccessorLimit(v, -1, deadline);
  // Feasible starts: every predecessor keeps room for its fastest clock and
  // v keeps room for its own.
  double lo = 0;
  for (int k = g_.pred_begin[v]; k < g_.pred_begin[v + 1]; ++k) {
    const int p = g_.pred[k];
    lo = std::max(lo, start_[p] + g_.hulls[g_.hull_of[p]].pareto.front().time_s);
  }
  const double hi = own_limit - own.front().time_s;
  if (!(lo <= hi)) return false;

  auto objective = [&](double x) {
    double total = CostWithin(v, own_limit - x);
    for (int k = g_.pred_begin[v]; k < g_.pred_begin[v + 1]; ++k) {
      const int p = g_.pred[k];
      total += CostWithin(p, std::min(SuccessorLimit(p, v, deadline), x) - start_[p]);
    }
    return total;
  };

  // Breakpoints: where v's window exactly fits one of its clocks, or a
  // predecessor's window exactly fits one of its clocks.
  candidates_.clear();
  candidates_.push_back(start_[v]);
  for (const Option& o : own) {
    const double x = own_limit - o.time_s;
    if (x >= lo && x <= hi) candidates_.push_back(x);
  }
  for (int k = g_.pred_begin[v]; k < g_.pred_begin[v + 1]; ++k) {
    const int p = g_.pred[k];
    for (const Option& o : g_.hulls[g_.hull_of[p]].pareto) {
      const double x = start_[p] + o.time_s;
      if (x >= lo && x <= hi) candidates_.push_back(x);
    }
  }
  const double current = objective(start_[v]);
  double best = current, best_x = start_[v];
  for (double x : candidates_) {
    const double value = objective(x);
    if (value < best - 1e-9) {
      best = value;
      best_x = x;
    }
  }
  if (best_x == start_[v]) return false;
  start_[v] = best_x;
  changed_at_[v] = ++version_;
  return true;
}

void Polisher::Polish(double deadline, RoundedPlan& plan, int max_sweeps, const StopCheck& stop) {
  const int n = g_.n;
  // Timetable of the rounded plan: earliest starts.
  start_.assign(n, 0.0);
  for (int p = 0; p < n; ++p) {
    double s = 0;
    for (int k = g_.pred_begin[p]; k < g_.pred_begin[p + 1]; ++k) {
      const int q = g_.pred[k];
      s = std::max(s, start_[q] + g_.hulls[g_.hull_of[q]].pareto[plan.choice[q]].time_s);
    }
    start_[p] = s;
  }
  version_ = 0;
  changed_at_.assign(n, 0);
  evaluated_at_.assign(n, -1);
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    bool moved = false;
    for (int i = 0; i < n; ++i) {
      if ((i & 1023) == 0) stop();
      moved |= Move(sweep % 2 == 0 ? i : n - 1 - i, deadline);
    }
    if (!moved) break;
  }

  // Clocks from the windows, then an exact evaluation of the result.
  RoundedPlan polished;
  polished.choice.resize(n);
  for (int p = 0; p < n; ++p) {
    const std::vector<Option>& options = g_.hulls[g_.hull_of[p]].pareto;
    polished.choice[p] =
        std::max(0, SlowestFitting(options, SuccessorLimit(p, -1, deadline) - start_[p]));
  }
  EvaluateChoice(g_, p_block_, polished);
  if (polished.time_s <= deadline && polished.energy_j < plan.energy_j) plan = std::move(polished);
}

}  // namespace joulepipe::solver

#include "greedy.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

namespace joulepipe::solver {

namespace {

struct Move {
  double ratio = 0;  // J saved per second of float used
  int option = -1;   // target Pareto index, -1: none fits
};

class Filler {
 public:
  Filler(const ActivityGraph& g, double deadline, const std::vector<int>* start,
         const StopCheck& stop)
      : g_(g), deadline_(deadline), stop_(stop) {
    const int n = g.n;
    if (start != nullptr) {
      choice_ = *start;
    } else {
      choice_.assign(n, 0);
    }
    d_.resize(n);
    for (int p = 0; p < n; ++p) d_[p] = Options(p)[choice_[p]].time_s;
    es_.assign(n, 0.0);
    for (int p = 0; p < n; ++p) es_[p] = EarliestStart(p);
    dirty_.assign(n, 0);
    lf_.assign(n, deadline);
    for (int p = n - 1; p >= 0; --p) lf_[p] = LatestFinish(p);
  }

  void Run() {
    using Entry = std::pair<double, int>;  // (ratio, activity)
    std::priority_queue<Entry> queue;
    for (int p = 0; p < g_.n; ++p) {
      const Move m = BestMove(p);
      if (m.option >= 0) queue.push({m.ratio, p});
    }
    while (!queue.empty()) {
      stop_();
      const auto [ratio, p] = queue.top();
      queue.pop();
      const Move m = BestMove(p);
      if (m.option < 0) continue;
      if (m.ratio < ratio * (1 - 1e-12)) {  // stale: float shrank since it was queued
        queue.push({m.ratio, p});
        continue;
      }
      Apply(p, m.option);
      const Move next = BestMove(p);
      if (next.option >= 0) queue.push({next.ratio, p});
    }
  }

  const std::vector<int>& choice() const { return choice_; }

 private:
  const std::vector<Option>& Options(int p) const { return g_.hulls[g_.hull_of[p]].pareto; }

  double EarliestStart(int p) const {
    double s = 0;
    for (int k = g_.pred_begin[p]; k < g_.pred_begin[p + 1]; ++k) {
      const int q = g_.pred[k];
      s = std::max(s, es_[q] + d_[q]);
    }
    return s;
  }
  double LatestFinish(int p) const {
    double f = deadline_;
    for (int k = g_.succ_begin[p]; k < g_.succ_begin[p + 1]; ++k) {
      const int q = g_.succ[k];
      f = std::min(f, lf_[q] - d_[q]);
    }
    return f;
  }

  // The slower clock with the best saving per second that fits p's float.
  // The fit is checked as es + t <= lf, the same sum the final evaluation
  // forms, so no round-off can push the makespan past the deadline.
  Move BestMove(int p) const {
    const std::vector<Option>& options = Options(p);
    const Option& now = options[choice_[p]];
    Move best;
    for (int j = choice_[p] + 1; j < static_cast<int>(options.size()); ++j) {
      if (es_[p] + options[j].time_s > lf_[p]) break;
      const double ratio = (now.cost_j - options[j].cost_j) / (options[j].time_s - now.time_s);
      if (ratio > best.ratio) best = {ratio, j};
    }
    return best;
  }

  void Apply(int p, int option) {
    choice_[p] = option;
    d_[p] = Options(p)[option].time_s;
    // Earliest starts can only grow downstream of p; latest finishes can
    // only shrink upstream. Positions are a topological order, so one scan
    // upward from p's first successor (downward from its last predecessor)
    // recomputes each marked node after all its inputs, and marks its
    // successors (predecessors) only when its value changed. The scan stops
    // past the last marked position: flags cost a byte a node, where a heap
    // of positions cost a log and duplicates per push.
    int last = -1;
    for (int k = g_.succ_begin[p]; k < g_.succ_begin[p + 1]; ++k) {
      dirty_[g_.succ[k]] = 1;
      last = std::max(last, g_.succ[k]);
    }
    for (int q = p + 1; q <= last; ++q) {
      if (!dirty_[q]) continue;
      dirty_[q] = 0;
      const double s = EarliestStart(q);
      if (s == es_[q]) continue;
      es_[q] = s;
      for (int k = g_.succ_begin[q]; k < g_.succ_begin[q + 1]; ++k) {
        dirty_[g_.succ[k]] = 1;
        last = std::max(last, g_.succ[k]);
      }
    }
    int first = g_.n;
    for (int k = g_.pred_begin[p]; k < g_.pred_begin[p + 1]; ++k) {
      dirty_[g_.pred[k]] = 1;
      first = std::min(first, g_.pred[k]);
    }
    for (int q = p - 1; q >= first; --q) {
      if (!dirty_[q]) continue;
      dirty_[q] = 0;
      const double f = LatestFinish(q);
      if (f == lf_[q]) continue;
      lf_[q] = f;
      for (int k = g_.pred_begin[q]; k < g_.pred_begin[q + 1]; ++k) {
        dirty_[g_.pred[k]] = 1;
        first = std::min(first, g_.pred[k]);
      }
    }
  }

  const ActivityGraph& g_;
  const double deadline_;
  const StopCheck stop_;
  std::vector<int> choice_;
  std::vector<double> d_, es_, lf_;
  std::vector<char> dirty_;  // all 0 between Apply calls
};

}  // namespace

RoundedPlan GreedyFill(const ActivityGraph& g, double p_block_w, double deadline,
                       const std::vector<int>* start, const StopCheck& stop) {
  Filler filler(g, deadline, start, stop);
  filler.Run();
  RoundedPlan out;
  out.choice = filler.choice();
  EvaluateChoice(g, p_block_w, out);
  return out;
}

}  // namespace joulepipe::solver

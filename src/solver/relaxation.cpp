#include "relaxation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "min_cut.hpp"
#include "series_contraction.hpp"

namespace joulepipe::solver {

namespace {

// The relaxed iteration energy at makespan t. This is the energy rule of
// model/energy.hpp,
//   E = sum_i e_i + P_block * (S * T - sum_i t_i)        (model::IterationEnergyJ)
// rewritten with each activity's effective energy c_i = e_i - P_block * t_i
// (cost_hull.hpp) as
//   E = sum_i c_i + S * P_block * T.
// The relaxation works in this form because its hulls, slopes and cuts are
// over c: `cost_j` is sum_i c_i, updated step by step (cost_ += rate * delta)
// with activities strictly inside hull segments, where no clock, and so no
// separate e_i and t_i, exists. Going through IterationEnergyJ would mean
// adding P_block * sum_i d_i to sum_i c_i only for the rule to subtract it
// again: two more roundings and another order of operations for the bound
// that Frontier::bound reports. tests/solver/energy_rule_test.cpp checks the
// two forms agree where the relaxation sits on real clocks.
double RelaxedEnergyJ(double cost_j, int stages, double p_block_w, double t) {
  return cost_j + stages * p_block_w * t;
}

// Where one activity sits on its hull: at vertex k, or strictly inside
// segment k (between vertices k and k+1).
struct Position {
  int k = 0;
  bool at_vertex = true;
};

class Crasher {
 public:
  Crasher(const ActivityGraph& g, double p_block_w, MinCutFunction min_cut)
      : g_(g), p_block_(p_block_w), min_cut_(min_cut), warm_(3 * g.n + g.succ_begin[g.n]) {
    d_ = CheapestDurations(g);
    pos_.resize(g.n);
    for (int p = 0; p < g.n; ++p) {
      const CostHull& h = Hull(p);
      pos_[p] = {static_cast<int>(h.vertices.size()) - 1, true};
      cost_ += h.vertices.back().cost_j;
    }
  }

  Relaxation Run(const std::function<void(double)>& progress,
                 const std::function<void(const RelaxationStep&)>& on_step) {
    Relaxation out;
    // The fastest makespan (every activity at its fastest vertex) bounds the
    // range the crashing walks, for progress reports.
    const double t_fastest = EarliestFinish(g_, FastestDurations(g_), ef_);
    out.initial = d_;
    double t = EarliestFinish(g_, d_, ef_);
    const double t_slowest = t;
    out.curve.push_back({t, RelaxedEnergyJ(cost_, g_.num_stages, p_block_, t)});
    // Each step moves at least one activity to a vertex or makes a path
    // critical; the guard only protects against numerical cycling.
    const long max_steps = 200L * g_.n + 100000;
    for (long step = 0; step < max_steps; ++step) {
      RelaxationStep s;
      if (!Step(t, s)) break;
      t -= s.delta;
      out.curve.push_back({t, RelaxedEnergyJ(cost_, g_.num_stages, p_block_, t)});
      out.steps.push_back(std::move(s));
      if (on_step) on_step(out.steps.back());
      if (progress && t_slowest > t_fastest) progress((t_slowest - t) / (t_slowest - t_fastest));
    }
    out.t_min = t;
    return out;
  }

 private:
  const CostHull& Hull(int p) const { return g_.hulls[g_.hull_of[p]]; }

  // Marginal cost (J/s) of shortening p; infinite at its fastest vertex.
  double ShortenCost(int p) const {
    const Position& x = pos_[p];
    if (x.at_vertex) return x.k == 0 ? kInfiniteCapacity : Hull(p).SegmentSlope(x.k - 1);
    return Hull(p).SegmentSlope(x.k);
  }
  // Marginal gain (J/s) of lengthening p; zero at its cheapest vertex.
  double LengthenGain(int p) const {
    const Position& x = pos_[p];
    const int last = static_cast<int>(Hull(p).vertices.size()) - 1;
    if (x.at_vertex && x.k == last) return 0;
    return Hull(p).SegmentSlope(x.k);
  }
  double ShortenRoom(int p) const {
    const Position& x = pos_[p];
    const auto& v = Hull(p).vertices;
    return d_[p] - v[x.at_vertex ? x.k - 1 : x.k].time_s;
  }
  double LengthenRoom(int p) const { return Hull(p).vertices[pos_[p].k + 1].time_s - d_[p]; }

  bool Step(double t, RelaxationStep& s) {
    const double eps = 1e-10 * (1 + t);
    LatestFinish(g_, d_, t, lf_);
    // Flow network over the critical subgraph: node 0 = source, 1 = sink,
    // 2 + 2i / 3 + 2i = start / end event of the i-th critical activity.
    index_.assign(g_.n, -1);
    critical_.clear();
    for (int p = 0; p < g_.n; ++p) {
      if (lf_[p] - ef_[p] <= eps) {
        index_[p] = static_cast<int>(critical_.size());
        critical_.push_back(p);
      }
    }
    // Arc keys for the warm start: activity p's arc is p, its source arc
    // n + p, its sink arc 2n + p, the precedence arc of successor slot k 3n + k.
    network_.clear();
    keys_.clear();
    const int n = g_.n;
    for (int i = 0; i < static_cast<int>(critical_.size()); ++i) {
      const int p = critical_[i];
      const int in = 2 + 2 * i, out = 3 + 2 * i;
      network_.push_back({in, out, LengthenGain(p), ShortenCost(p), p, p});
      keys_.push_back(p);
      const double start = ef_[p] - d_[p];
      if (start <= eps) {
        network_.push_back({0, in, 0, kInfiniteCapacity, -1, -1});
        keys_.push_back(n + p);
      }
      if (ef_[p] >= t - eps) {
        network_.push_back({out, 1, 0, kInfiniteCapacity, -1, -1});
        keys_.push_back(2 * n + p);
      }
      for (int k = g_.succ_begin[p]; k < g_.succ_begin[p + 1]; ++k) {
        const int q = g_.succ[k];
        if (index_[q] >= 0 && ef_[q] - d_[q] - ef_[p] <= eps) {
          network_.push_back({out, 2 + 2 * index_[q], 0, kInfiniteCapacity, -1, -1});
          keys_.push_back(3 * n + k);
        }
      }
    }
    const int nodes = 2 + 2 * static_cast<int>(critical_.size());
    // A given min-cut function solves each network cold, series-contracted;
    // the default warm-starts from the last step's flow on the whole network
    // (contraction would change the arcs' identities from step to step).
    if (min_cut_ != nullptr) ContractSeries(nodes, 0, 1, network_);
    arcs_.clear();
    live_.clear();
    live_keys_.clear();
    for (int k = 0; k < static_cast<int>(network_.size()); ++k) {
      const NetworkArc& a = network_[k];
      if (a.from < 0) continue;
      arcs_.push_back({a.from, a.to, a.lower, a.upper});
      live_.push_back(k);
      live_keys_.push_back(keys_[k]);
    }
    const CutResult cut = min_cut_ != nullptr ? min_cut_(nodes, 0, 1, arcs_)
                                              : warm_.Solve(nodes, 0, 1, arcs_, live_keys_);
    if (!cut.feasible || !cut.finite) return false;

    double room = std::numeric_limits<double>::infinity();
    double rate = 0;  // cost increase per second of makespan removed
    for (int k : live_) {
      const NetworkArc& a = network_[k];
      const bool from = cut.source_side[a.from], to = cut.source_side[a.to];
      if (from && !to) {
        const int p = a.shorten;
        if (p < 0) return false;  // an infinite arc in a finite cut: round-off
        s.shortened.push_back(p);
        room = std::min(room, ShortenRoom(p));
        rate += ShortenCost(p);
      } else if (!from && to && a.lower > 0 && a.lengthen >= 0) {
        const int p = a.lengthen;
        s.lengthened.push_back(p);
        room = std::min(room, LengthenRoom(p));
        rate -= LengthenGain(p);
      }
    }
    if (s.shortened.empty() || !(room > 0)) return false;
    const double delta = LimitByFloat(t, s, room);
    if (!(delta > eps * 1e-3)) return false;
    Apply(s, delta, eps);
    cost_ += rate * delta;
    s.t_before = t;
    s.delta = delta;
    // The step keeps the critical paths at exactly t - delta; recompute the
    // earliest finishes for the next step.
    EarliestFinish(g_, d_, ef_);
    return true;
  }

  // Largest delta <= room such that no path outgrows the new makespan
  // t - delta. The makespan under the step, L(delta), is the maximum of
  // linear functions (one per path), so Newton iteration from the right
  // reaches the exact crossing in a few passes.
  double LimitByFloat(double t, const RelaxationStep& s, double room) {
    rate_.assign(g_.n, 0);
    for (int p : s.shortened) rate_[p] = -1;
    for (int p : s.lengthened) rate_[p] = +1;
    double delta = room;
    for (int iter = 0; iter < 64; ++iter) {
      double length = 0, path_rate = 0;
      MakespanUnder(delta, length, path_rate);
      const double excess = length - (t - delta);
      if (excess <= 1e-12 * (1 + t)) return delta;
      const double slope = path_rate + 1;  // d(excess)/d(delta) along that path
      if (!(slope > 0)) return delta * 0.5;
      const double at_zero = length - path_rate * delta;
      const double next = (t - at_zero) / slope;
      if (!(next < delta)) return delta * 0.5;
      delta = std::max(next, 0.0);
    }
    return delta;
  }

  void MakespanUnder(double delta, double& length, double& path_rate) {
    ef2_.resize(g_.n);
    r2_.resize(g_.n);
    length = -1;
    path_rate = 0;
    for (int p = 0; p < g_.n; ++p) {
      double start = 0, r = 0;
      for (int k = g_.pred_begin[p]; k < g_.pred_begin[p + 1]; ++k) {
        const int q = g_.pred[k];
        if (ef2_[q] > start + 1e-13 || (ef2_[q] >= start - 1e-13 && r2_[q] > r)) {
          start = std::max(start, ef2_[q]);
          r = r2_[q];
        }
      }
      ef2_[p] = start + d_[p] + rate_[p] * delta;
      r2_[p] = r + rate_[p];
      if (ef2_[p] > length + 1e-13 || (ef2_[p] >= length - 1e-13 && r2_[p] > path_rate)) {
        length = std::max(length, ef2_[p]);
        path_rate = r2_[p];
      }
    }
  }

  void Apply(const RelaxationStep& s, double delta, double eps) {
    const double snap = 1e-3 * eps;
    for (int p : s.shortened) {
      Position& x = pos_[p];
      const auto& v = Hull(p).vertices;
      const int target = x.at_vertex ? x.k - 1 : x.k;
      if (ShortenRoom(p) - delta <= snap) {
        x = {target, true};
        d_[p] = v[target].time_s;
      } else {
        x = {target, false};
        d_[p] -= delta;
      }
    }
    for (int p : s.lengthened) {
      Position& x = pos_[p];
      const auto& v = Hull(p).vertices;
      if (LengthenRoom(p) - delta <= snap) {
        x = {x.k + 1, true};
        d_[p] = v[x.k].time_s;
      } else {
        x.at_vertex = false;
        d_[p] += delta;
      }
    }
  }

  const ActivityGraph& g_;
  const double p_block_;
  const MinCutFunction min_cut_;  // nullptr: warm_
  WarmMinCut warm_;
  std::vector<double> d_;
  std::vector<Position> pos_;
  double cost_ = 0;
  // Scratch, reused across steps.
  std::vector<double> ef_, lf_, ef2_;
  std::vector<int> r2_, rate_, index_, critical_;
  std::vector<CutArc> arcs_;
  std::vector<NetworkArc> network_;
  std::vector<int> live_, keys_, live_keys_;
};

}  // namespace

Relaxation SolveRelaxation(const ActivityGraph& g, double p_block_w, MinCutFunction min_cut,
                           const std::function<void(double)>& progress,
                           const std::function<void(const RelaxationStep&)>& on_step) {
  return Crasher(g, p_block_w, min_cut).Run(progress, on_step);
}

std::vector<double> CheapestDurations(const ActivityGraph& g) {
  std::vector<double> d(g.n);
  for (int p = 0; p < g.n; ++p) d[p] = g.hulls[g.hull_of[p]].vertices.back().time_s;
  return d;
}

std::vector<double> FastestDurations(const ActivityGraph& g) {
  std::vector<double> d(g.n);
  for (int p = 0; p < g.n; ++p) d[p] = g.hulls[g.hull_of[p]].vertices.front().time_s;
  return d;
}

void DurationsWithin(const RelaxationStep& step, const std::vector<double>& at_start, double t,
                     std::vector<double>& out) {
  out = at_start;
  const double moved = std::clamp(step.t_before - t, 0.0, step.delta);
  for (int p : step.shortened) out[p] -= moved;
  for (int p : step.lengthened) out[p] += moved;
}

}  // namespace joulepipe::solver

// Acceptance test of the frontier planner against the exact optimum.
//
// 200 random tiny pipelines (2-3 stages, 2-4 microbatches, mostly 1F1B, some
// GPipe; 3-4 clocks per (stage, kind)) with realistic DVFS-shaped profiles.
// The exact least-energy clock assignment for each deadline is found by an
// exhaustive search over EVERY clock of every instruction (ExactSearch below:
// no Pareto or hull reduction taken from the solver), pruned only by
// dominance and by valid bounds.
//
// For the zero-slowdown deadline T0 (all-max-clock makespan) the planner's
// best plan within T0 must never exceed T0, never beat the exact optimum
// (that would be an evaluation bug), be within 1% of it on >= 95% of the
// instances, and the relaxation bound must not exceed the optimum. At 1.05*T0
// (deadline grid only) and 1.1*T0 (an extra deadline) the same, >= 90%.
//
// Energy is the rule of model/energy.hpp: sum_i e_i + P_block * sum_stages (T - busy_s), GPU
// only, simulated from the synthetic profiles.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::solver {
namespace {

constexpr int kInstances = 200;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Instance {
  int seed = 0;
  schedule::Spec spec;
  model::Profile profile;
  double p_block_w = 0;
  std::string label;
};

double Uniform(std::mt19937& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
int UniformInt(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Profile of one (stage, kind): clocks f_1 > f_2 > ... from fmax down;
// time(f) = t0 * (a + (1 - a) * fmax / f); power(f) = P_static + c * f^k with
// power(fmax) = p_max; energy = power * time; +-2% noise on both.
void AddProfile(std::mt19937& rng, model::Profile& profile, int stage, model::Kind kind, double t0,
                double p_max) {
  const int clocks = UniformInt(rng, 3, 4);
  const int fmax = 15 * UniformInt(rng, 80, 132);  // 1200..1980 MHz
  const double a = Uniform(rng, 0.3, 0.6);
  const double exponent = Uniform(rng, 2.0, 3.0);
  const double p_static = p_max * Uniform(rng, 0.25, 0.5);
  const double c = (p_max - p_static) / std::pow(fmax, exponent);
  int f = fmax;
  for (int i = 0; i < clocks; ++i) {
    if (i > 0) f -= 15 * UniformInt(rng, 3, 16);  // 45..240 MHz lower
    const double time = t0 * (a + (1 - a) * static_cast<double>(fmax) / f);
    const double power = p_static + c * std::pow(f, exponent);
    model::ClockPoint point;
    point.mhz = f;
    point.time_s = time * (1 + Uniform(rng, -0.02, 0.02));
    point.energy_j = power * time * (1 + Uniform(rng, -0.02, 0.02));
    profile.Add(stage, kind, point);
  }
}

// Instance `index` (seed 7919 + index); `stages` / `microbatches` > 0
// override the drawn shape.
Instance MakeInstance(int index, int stages = 0, int microbatches = 0) {
  Instance in;
  in.seed = 7919 + index;
  std::mt19937 rng(in.seed);
  in.spec.kind = UniformInt(rng, 0, 5) == 0 ? schedule::Kind::kGPipe : schedule::Kind::k1F1B;
  in.spec.stages = UniformInt(rng, 2, 3);
  in.spec.microbatches = UniformInt(rng, 2, 4);
  if (stages > 0) in.spec.stages = stages;
  if (microbatches > 0) in.spec.microbatches = microbatches;
  in.spec.chunks = 1;
  in.p_block_w = Uniform(rng, 50, 100);
  for (int s = 0; s < in.spec.stages; ++s) {
    const double forward = Uniform(rng, 0.5, 1.0);
    const double backward = forward * Uniform(rng, 1.8, 2.0);
    AddProfile(rng, in.profile, s, model::Kind::kForward, forward, Uniform(rng, 200, 400));
    AddProfile(rng, in.profile, s, model::Kind::kBackward, backward, Uniform(rng, 200, 400));
  }
  in.label =
      "seed " + std::to_string(in.seed) + " (" + std::string(schedule::KindName(in.spec.kind)) +
      ", S=" + std::to_string(in.spec.stages) + ", M=" + std::to_string(in.spec.microbatches) +
      ", P_block=" + std::to_string(in.p_block_w) + ")";
  return in;
}

struct Exact {
  double energy_j = kInf;  // +inf if no assignment meets the deadline
  double time_s = 0;
  std::vector<std::uint16_t> mhz;  // per schedule node id
  long labels = 0;                 // partial assignments kept, all levels
};

// The exact least-energy clock assignment for a deadline, over EVERY clock of
// every instruction (nothing is taken from the solver's hulls or Pareto sets).
//
// Dynamic programming over the instructions in a topological order: a label
// is a partial assignment of the first k instructions, kept as its cost so
// far and the finish times of the assigned instructions that later ones (or
// the makespan) still depend on. Energy = sum of costs + S * P_block * T with
// cost_i = e_i - P_block * t_i, i.e. model/energy.hpp's rule
// sum_i e_i + P_block * sum_stages (T - busy). A label is dropped only when
//   * another label of the same level dominates it (no higher cost and no
//     later finish anywhere): each completion of the dropped label is at
//     least as good from the other one, as finish times are monotone in
//     start times; or
//   * some remaining instruction cannot meet the deadline even at its fastest
//     clock; or
//   * a lower bound on every completion is above the incumbent: the exact
//     energy of a given assignment that meets the deadline (+inf if none).
//     Two valid bounds are used, whichever is larger:
//       - per stage, the stage's remaining instructions form a path, so
//         their durations must fit between a lower bound on the first one's
//         start and the deadline minus the fastest tail after the last one:
//         the LP relaxation of that multiple-choice knapsack, by slopes;
//       - Lagrangian relaxation of path constraints "path length <= T" with
//         multipliers fitted once per deadline by subgradient ascent (any
//         nonnegative multipliers give a valid bound).
// The result is the exact optimum whatever the incumbent is; the incumbent
// (here the planner's plan, re-evaluated by this class) only speeds it up.
class ExactSearch {
 public:
  ExactSearch(const schedule::Schedule& schedule, const model::Profile& profile, double p_block_w)
      : schedule_(schedule),
        p_block_(p_block_w),
        stages_pb_(schedule.spec.stages * p_block_w),
        n_(schedule.num_nodes()) {
    // Order by earliest start under the fastest times (a topological order,
    // as every time is > 0); it keeps the frontier narrow.
    std::vector<double> fastest(n_, kInf), start(n_, 0);
    for (int node = 0; node < n_; ++node) {
      const model::Instruction& ins = schedule.nodes[node];
      for (const model::ClockPoint& p : profile.Points(ins.stage, ins.kind)) {
        fastest[node] = std::min(fastest[node], p.time_s);
      }
    }
    std::vector<int> topo_rank(n_);
    for (int k = 0; k < n_; ++k) topo_rank[schedule.topological_order[k]] = k;
    for (int node : schedule.topological_order) {
      for (int q : schedule.predecessors[node]) {
        start[node] = std::max(start[node], start[q] + fastest[q]);
      }
    }
    order_ = schedule.topological_order;
    std::sort(order_.begin(), order_.end(), [&](int x, int y) {
      if (start[x] != start[y]) return start[x] < start[y];
      return topo_rank[x] < topo_rank[y];
    });
    std::vector<int> pos(n_);
    for (int k = 0; k < n_; ++k) pos[order_[k]] = k;

    options_.resize(n_);
    by_time_.resize(n_);
    preds_.resize(n_);
    succs_.resize(n_);
    stage_positions_.resize(schedule.spec.stages);
    t_min_.assign(n_, kInf);
    last_use_.assign(n_, n_);  // sinks stay in every frontier: they give T
    for (int k = 0; k < n_; ++k) {
      const int node = order_[k];
      const model::Instruction& ins = schedule.nodes[node];
      for (const model::ClockPoint& p : profile.Points(ins.stage, ins.kind)) {
        options_[k].push_back({p.mhz, p.time_s, p.energy_j, p.energy_j - p_block_w * p.time_s});
        t_min_[k] = std::min(t_min_[k], p.time_s);
      }
      by_time_[k] = options_[k];
      std::sort(by_time_[k].begin(), by_time_[k].end(), [](const Opt& x, const Opt& y) {
        return x.time != y.time ? x.time < y.time : x.cost < y.cost;
      });
      stage_positions_[ins.stage].push_back(k);
      for (int q : schedule.predecessors[node]) {
        preds_[k].push_back(pos[q]);
        if (pos[q] >= k) ADD_FAILURE() << "order is not topological";
      }
      if (!schedule.successors[node].empty()) last_use_[k] = 0;
      for (int q : schedule.successors[node]) {
        succs_[k].push_back(pos[q]);
        last_use_[k] = std::max(last_use_[k], pos[q]);
      }
      if (schedule.successors[node].empty()) sinks_.push_back(k);
    }
    // tail_after_[k]: longest path (fastest times) from k's end to the end.
    std::vector<double> tail(n_, 0);
    tail_after_.assign(n_, 0);
    for (int k = n_ - 1; k >= 0; --k) {
      for (int q : succs_[k]) tail_after_[k] = std::max(tail_after_[k], tail[q]);
      tail[k] = t_min_[k] + tail_after_[k];
    }
    // frontier_[k]: positions < k whose finish positions >= k (or T) need.
    frontier_.resize(n_ + 1);
    for (int k = 0; k <= n_; ++k) {
      for (int p = 0; p < k; ++p) {
        if (last_use_[p] >= k) frontier_[k].push_back(p);
      }
    }
    est_.assign(n_, 0);
    finish_.assign(n_, 0);
  }

  // `incumbent`: an assignment (MHz per node id) whose energy, if it meets the
  // deadline, seeds the pruning.
  Exact Solve(double deadline, const std::vector<std::uint16_t>& incumbent = {}) {
    const double limit = deadline * (1 + 1e-9);  // pruning slack; the result is checked exactly
    Exact result;
    if (!incumbent.empty()) result = Evaluate(incumbent, deadline);
    FitMultipliers(limit, result.energy_j);

    std::vector<Level> levels(n_ + 1);
    levels[0].cost.push_back(0);
    levels[0].parent.push_back(-1);
    levels[0].option.push_back(0);
    std::vector<double> row;
    for (int k = 0; k < n_; ++k) {
      const Level& from = levels[k];
      const std::vector<int>& in = frontier_[k];
      const std::vector<int>& out = frontier_[k + 1];
      const int din = static_cast<int>(in.size()), dout = static_cast<int>(out.size());
      row.resize(dout);
      Level next;
      for (int l = 0; l < static_cast<int>(from.cost.size()); ++l) {
        const double* f = from.finish.data() + static_cast<long>(l) * din;
        for (int i = 0; i < din; ++i) finish_[in[i]] = f[i];
        double start = 0;
        for (int q : preds_[k]) start = std::max(start, finish_[q]);
        for (int j = 0; j < static_cast<int>(options_[k].size()); ++j) {
          const Opt& o = options_[k][j];
          finish_[k] = start + o.time;
          if (finish_[k] + tail_after_[k] > limit) continue;
          const double cost = from.cost[l] + o.cost;
          double rest = 0;
          if (!Bound(k + 1, limit, rest)) continue;
          // Conservative by 1e-10 so rounding never drops a better completion.
          if (cost + rest >= result.energy_j * (1 + 1e-10)) continue;
          for (int i = 0; i < dout; ++i) row[i] = finish_[out[i]];
          next.finish.insert(next.finish.end(), row.begin(), row.end());
          next.cost.push_back(cost);
          next.parent.push_back(l);
          next.option.push_back(static_cast<unsigned char>(j));
        }
      }
      levels[k + 1] = KeepNonDominated(next, dout);
      result.labels += static_cast<long>(levels[k + 1].cost.size());
    }
    // Complete assignments: the best one, re-evaluated exactly.
    const Level& last = levels[n_];
    const int dim = static_cast<int>(frontier_[n_].size());
    int best = -1;
    double best_energy = kInf;
    for (int l = 0; l < static_cast<int>(last.cost.size()); ++l) {
      const double* f = last.finish.data() + static_cast<long>(l) * dim;
      const double makespan = *std::max_element(f, f + dim);
      if (makespan > deadline * (1 + 1e-12)) continue;  // within the pruning slack only
      const double energy = last.cost[l] + stages_pb_ * makespan;
      if (energy < best_energy) best = l, best_energy = energy;
    }
    if (best < 0) return result;
    std::vector<std::uint16_t> mhz(n_);
    for (int k = n_, l = best; k > 0; --k) {
      mhz[order_[k - 1]] = static_cast<std::uint16_t>(options_[k - 1][levels[k].option[l]].mhz);
      l = levels[k].parent[l];
    }
    const Exact found = Evaluate(mhz, deadline);
    if (found.energy_j < result.energy_j) {
      const long labels = result.labels;
      result = found;
      result.labels = labels;
    }
    return result;
  }

 private:
  struct Opt {
    int mhz;
    double time, energy, cost;
  };
  struct Level {
    std::vector<double> finish;  // frontier finish times, one row per label
    std::vector<double> cost;
    std::vector<int> parent;
    std::vector<unsigned char> option;
  };

  // est_[u] for u >= k: a lower bound on u's start, from finish_ of the
  // frontier of k and the fastest times of the rest. Returns the matching
  // lower bound on the makespan.
  double Estimates(int k) {
    double makespan = 0;
    for (int q : sinks_) {
      if (q < k) makespan = std::max(makespan, finish_[q]);
    }
    for (int u = k; u < n_; ++u) {
      double start = 0;
      for (int q : preds_[u]) start = std::max(start, q < k ? finish_[q] : est_[q] + t_min_[q]);
      est_[u] = start;
      makespan = std::max(makespan, start + t_min_[u] + tail_after_[u]);
    }
    return makespan;
  }

  // Room for u alone: est(u) + t + fastest tail after u <= deadline.
  double Room(int u, double limit) const { return limit - tail_after_[u] - est_[u]; }

  // Lower bound `rest` on (cost of positions k..n-1) + S * P_block * T given
  // finish_ of the frontier of k; false if they cannot all fit.
  bool Bound(int k, double limit, double& rest) {
    double makespan = Estimates(k);
    // Lagrangian: sum over paths P of lambda_P * (offset_P + sum_{u in P, u >= k} t_u - T) <= 0,
    // where offset_P is est of P's first remaining instruction (or the
    // finish of its sink when P is fully assigned).
    double lagrangian = 0;
    for (int u = k; u < n_; ++u) {
      const double room = Room(u, limit);
      double least = kInf;
      for (const Opt& o : by_time_[u]) {
        if (o.time > room) break;
        least = std::min(least, o.cost + x_[u] * o.time);
      }
      if (least == kInf) return false;
      lagrangian += least + w_[k][u] * est_[u];
    }
    for (int q : sinks_) {
      if (q < k) lagrangian += w_[k][q] * finish_[q];
    }
    // Stage chains.
    double chain_cost = 0;
    for (const std::vector<int>& chain : stage_positions_) {
      auto first = std::lower_bound(chain.begin(), chain.end(), k);
      if (first == chain.end()) continue;
      const int last = chain.back();
      const double budget = limit - est_[*first] - tail_after_[last];
      double time = 0, fastest = 0, cost = 0;
      segments_.clear();
      for (auto it = first; it != chain.end(); ++it) {
        const int u = *it;
        const double room = Room(u, limit);
        hull_.clear();  // lower convex hull of the allowed clocks, fastest first
        for (const Opt& o : by_time_[u]) {
          if (o.time > room) break;
          if (!hull_.empty() && o.cost >= hull_.back().cost) continue;
          while (hull_.size() >= 2 && Cross(hull_[hull_.size() - 2], hull_.back(), o) <= 0) {
            hull_.pop_back();
          }
          hull_.push_back(o);
        }
        time += hull_.back().time;
        cost += hull_.back().cost;
        fastest += hull_.front().time;
        for (size_t i = 0; i + 1 < hull_.size(); ++i) {
          const double dt = hull_[i + 1].time - hull_[i].time;
          segments_.push_back({(hull_[i].cost - hull_[i + 1].cost) / dt, dt});
        }
      }
      if (fastest > budget) return false;
      makespan = std::max(makespan, est_[*first] + fastest + tail_after_[last]);
      double excess = time - budget;
      if (excess > 0) {
        std::sort(segments_.begin(), segments_.end());
        for (const auto& [slope, dt] : segments_) {
          const double take = std::min(dt, excess);
          cost += take * slope;
          excess -= take;
          if (excess <= 0) break;
        }
      }
      chain_cost += cost;
    }
    lagrangian += (stages_pb_ - flow_) * (flow_ > stages_pb_ ? limit : makespan);
    rest = std::max(chain_cost + stages_pb_ * makespan, lagrangian);
    return true;
  }

  // > 0 when b lies strictly below the segment a-c (time, cost plane).
  static double Cross(const Opt& a, const Opt& b, const Opt& c) {
    return (b.time - a.time) * (c.cost - a.cost) - (b.cost - a.cost) * (c.time - a.time);
  }

  // Multipliers lambda_P >= 0 on source-to-sink paths P (constraint: length
  // of P <= T), by projected subgradient ascent with Polyak steps towards
  // `target`; paths are added as they become the longest one. Fills x_
  // (multiplier through each instruction), flow_ (their sum) and w_[k][u]
  // (multiplier of the paths whose offset at level k is u's).
  void FitMultipliers(double limit, double target) {
    x_.assign(n_, 0);
    flow_ = 0;
    std::vector<std::vector<int>> paths;
    std::vector<double> lambda, best_lambda;
    if (std::isfinite(target)) {
      const double makespan = Estimates(0);
      std::vector<double> t(n_), ef(n_);
      std::vector<int> from(n_);
      double best = -kInf, theta = 1;
      int stall = 0;
      for (int iter = 0; iter < 400 && theta > 1e-3; ++iter) {
        std::fill(x_.begin(), x_.end(), 0);
        flow_ = 0;
        for (size_t p = 0; p < paths.size(); ++p) {
          for (int u : paths[p]) x_[u] += lambda[p];
          flow_ += lambda[p];
        }
        const double horizon = flow_ > stages_pb_ ? limit : makespan;
        double value = (stages_pb_ - flow_) * horizon;
        for (int u = 0; u < n_; ++u) {
          double least = kInf;
          for (const Opt& o : by_time_[u]) {
            if (o.time > Room(u, limit)) break;
            if (o.cost + x_[u] * o.time < least) least = o.cost + x_[u] * o.time, t[u] = o.time;
          }
          value += least;
        }
        if (value > best) {
          best = value;
          best_lambda = lambda;
          stall = 0;
        } else if (++stall >= 5) {
          theta *= 0.5;
          stall = 0;
        }
        // The longest path under the minimising durations joins the set.
        int end = 0;
        for (int u = 0; u < n_; ++u) {
          ef[u] = 0;
          from[u] = -1;
          for (int q : preds_[u]) {
            if (ef[q] > ef[u]) ef[u] = ef[q], from[u] = q;
          }
          ef[u] += t[u];
          if (ef[u] > ef[end]) end = u;
        }
        std::vector<int> path;
        for (int u = end; u >= 0; u = from[u]) path.push_back(u);
        std::reverse(path.begin(), path.end());
        if (std::find(paths.begin(), paths.end(), path) == paths.end()) {
          paths.push_back(path);
          lambda.push_back(0);
        }
        double norm = 0;
        std::vector<double> gradient(paths.size());
        for (size_t p = 0; p < paths.size(); ++p) {
          for (int u : paths[p]) gradient[p] += t[u];
          gradient[p] -= horizon;
          if (lambda[p] > 0 || gradient[p] > 0) norm += gradient[p] * gradient[p];
        }
        if (norm <= 0 || target <= value) break;
        const double step = theta * (target - value) / norm;
        for (size_t p = 0; p < paths.size(); ++p) {
          lambda[p] = std::max(0.0, lambda[p] + step * gradient[p]);
        }
      }
    }
    best_lambda.resize(paths.size(), 0);
    std::fill(x_.begin(), x_.end(), 0);
    flow_ = 0;
    w_.assign(n_ + 1, std::vector<double>(n_, 0));
    for (size_t p = 0; p < paths.size(); ++p) {
      const double l = best_lambda[p];
      if (l <= 0) continue;
      for (int u : paths[p]) x_[u] += l;
      flow_ += l;
      for (int k = 0; k <= n_; ++k) {
        auto first = std::lower_bound(paths[p].begin(), paths[p].end(), k);
        w_[k][first != paths[p].end() ? *first : paths[p].back()] += l;
      }
    }
  }

  static Level KeepNonDominated(const Level& all, int dim) {
    const int count = static_cast<int>(all.cost.size());
    std::vector<int> by_cost(count);
    for (int l = 0; l < count; ++l) by_cost[l] = l;
    std::sort(by_cost.begin(), by_cost.end(),
              [&](int x, int y) { return all.cost[x] < all.cost[y]; });
    Level kept;
    for (int l : by_cost) {
      const double* f = all.finish.data() + static_cast<long>(l) * dim;
      bool dominated = false;
      for (int m = 0; m < static_cast<int>(kept.cost.size()) && !dominated; ++m) {
        const double* g = kept.finish.data() + static_cast<long>(m) * dim;
        int i = 0;
        while (i < dim && g[i] <= f[i]) ++i;
        dominated = i == dim;
      }
      if (dominated) continue;
      kept.finish.insert(kept.finish.end(), f, f + dim);
      kept.cost.push_back(all.cost[l]);
      kept.parent.push_back(all.parent[l]);
      kept.option.push_back(all.option[l]);
    }
    return kept;
  }

  // Exact figures of an assignment; energy +inf if it misses the deadline.
  Exact Evaluate(const std::vector<std::uint16_t>& mhz, double deadline) const {
    Exact e;
    std::vector<double> finish(n_, 0);
    double makespan = 0, energy = 0, busy = 0;
    for (int k = 0; k < n_; ++k) {
      const Opt* o = nullptr;
      for (const Opt& x : options_[k]) {
        if (x.mhz == mhz[order_[k]]) o = &x;
      }
      if (o == nullptr) return e;
      double start = 0;
      for (int q : preds_[k]) start = std::max(start, finish[q]);
      finish[k] = start + o->time;
      makespan = std::max(makespan, finish[k]);
      energy += o->energy;
      busy += o->time;
    }
    if (makespan > deadline * (1 + 1e-12)) return e;
    e.energy_j = energy + p_block_ * (schedule_.spec.stages * makespan - busy);
    e.time_s = makespan;
    e.mhz = mhz;
    return e;
  }

  const schedule::Schedule& schedule_;
  const double p_block_, stages_pb_;
  const int n_;
  std::vector<int> order_;                         // position -> node id
  std::vector<std::vector<Opt>> options_;          // [position], as profiled
  std::vector<std::vector<Opt>> by_time_;          // [position], ascending time, then cost
  std::vector<std::vector<int>> preds_, succs_;    // positions
  std::vector<std::vector<int>> stage_positions_;  // [stage] -> positions, ascending
  std::vector<int> sinks_;                         // positions without successors
  std::vector<int> last_use_;                      // last successor position (n for sinks)
  std::vector<double> t_min_;                      // fastest time per position
  std::vector<double> tail_after_;                 // fastest path from a position's end to the end
  std::vector<std::vector<int>> frontier_;
  std::vector<double> x_;                            // Lagrange multiplier through each position
  double flow_ = 0;                                  // sum of the path multipliers
  std::vector<std::vector<double>> w_;               // [level][position] multiplier of offsets
  std::vector<double> est_, finish_;                 // scratch
  std::vector<Opt> hull_;                            // scratch
  std::vector<std::pair<double, double>> segments_;  // scratch: (slope, length)
};

// Independent plain evaluation of a clock assignment (the energy rule, model/energy.hpp).
Evaluation Evaluate(const schedule::Schedule& schedule, const model::Profile& profile,
                    double p_block_w, const std::vector<std::uint16_t>& mhz) {
  std::vector<double> finish(schedule.num_nodes(), 0);
  double makespan = 0, energy = 0, busy = 0;
  for (int node : schedule.topological_order) {
    const model::Instruction& ins = schedule.nodes[node];
    const model::ClockPoint* p = profile.Find(ins.stage, ins.kind, mhz[node]);
    if (p == nullptr) ADD_FAILURE() << "clock " << mhz[node] << " not in profile";
    if (p == nullptr) return {kInf, kInf};
    double start = 0;
    for (int q : schedule.predecessors[node]) start = std::max(start, finish[q]);
    finish[node] = start + p->time_s;
    makespan = std::max(makespan, finish[node]);
    energy += p->energy_j;
    busy += p->time_s;
  }
  return {makespan, energy + p_block_w * (schedule.spec.stages * makespan - busy)};
}

double Relative(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-300);
}

struct Tally {
  Tally(const char* name_, double factor_, double required_)
      : name(name_), factor(factor_), required(required_) {}
  const char* name;
  double factor;    // deadline = factor * T0
  double required;  // least fraction of instances within 1% of the optimum
  int within = 0;   // instances within 1% of the optimum
  int exact = 0;    // instances where the planner found the optimum (1e-9)
  int total = 0;
  double worst = 1;  // worst planner / optimum energy ratio
  std::string worst_label;
  double sum_gap = 0;        // sum of (ratio - 1)
  double loosest_bound = 1;  // least BoundAt(deadline) / optimum
  long labels = 0;           // exact search labels kept
};

TEST(BruteForce, PlannerMatchesExactOptimumOnTinyPipelines) {
  std::vector<Tally> tallies = {{"T0", 1.0, 0.95},
                                {"1.05*T0 (grid only)", 1.05, 0.90},
                                {"1.1*T0 (extra deadline)", 1.1, 0.90}};
  int gpipe = 0, largest = 0;
  for (int i = 0; i < kInstances; ++i) {
    const Instance in = MakeInstance(i);
    SCOPED_TRACE(in.label);
    const schedule::Schedule sched = schedule::Build(in.spec);
    if (in.spec.kind == schedule::Kind::kGPipe) ++gpipe;
    largest = std::max(largest, sched.num_nodes());

    // T0, independently: every instruction at its highest clock.
    std::vector<std::uint16_t> max_mhz(sched.num_nodes());
    for (int node = 0; node < sched.num_nodes(); ++node) {
      const model::Instruction& ins = sched.nodes[node];
      max_mhz[node] = static_cast<std::uint16_t>(in.profile.MaxClock(ins.stage, ins.kind).mhz);
    }
    const Evaluation base = Evaluate(sched, in.profile, in.p_block_w, max_mhz);
    const double t0 = base.time_s;

    Options options;
    options.p_block_w = in.p_block_w;
    options.extra_deadlines_s = {1.1 * t0};
    const Frontier frontier = SolveFrontier(sched, in.profile, options);
    ASSERT_NEAR(frontier.max_clock.time_s, t0, 1e-12 * t0);
    ASSERT_NEAR(frontier.max_clock.energy_j, base.energy_j, 1e-9 * base.energy_j);
    EXPECT_EQ(frontier.max_clock.mhz, max_mhz);

    ExactSearch search(sched, in.profile, in.p_block_w);
    for (Tally& tally : tallies) {
      const double deadline = tally.factor * t0;
      SCOPED_TRACE(tally.name);
      const FrontierPoint* best = frontier.BestWithin(deadline);
      ASSERT_NE(best, nullptr);
      const Exact exact = search.Solve(deadline, best->mhz);
      tally.labels += exact.labels;
      ASSERT_TRUE(std::isfinite(exact.energy_j));  // all-max-clock meets every deadline >= T0
      const Evaluation check = Evaluate(sched, in.profile, in.p_block_w, exact.mhz);
      EXPECT_LE(check.time_s, deadline * (1 + 1e-12));
      EXPECT_LE(Relative(check.energy_j, exact.energy_j), 1e-12);
      EXPECT_LE(exact.energy_j, base.energy_j * (1 + 1e-12));

      // (a) the planner's plan, evaluated here and by Replay, meets the
      // deadline, and its reported figures are its exact ones.
      const Evaluation planned = Evaluate(sched, in.profile, in.p_block_w, best->mhz);
      EXPECT_LE(planned.time_s, deadline * (1 + 1e-12));
      EXPECT_LE(Relative(best->time_s, planned.time_s), 1e-12);
      EXPECT_LE(Relative(best->energy_j, planned.energy_j), 1e-9);
      const schedule::ReplayResult replay =
          schedule::Replay(sched, in.profile, ToPlan(sched, *best), in.p_block_w);
      EXPECT_LE(replay.time_s, deadline * (1 + 1e-12));
      EXPECT_LE(Relative(replay.time_s, planned.time_s), 1e-9);
      EXPECT_LE(Relative(replay.energy_j, planned.energy_j), 1e-9);
      // (c) never below the true optimum.
      EXPECT_GE(best->energy_j, exact.energy_j * (1 - 1e-9))
          << "the planner reports less than the exhaustive optimum: evaluation bug";
      // (d) the relaxation is a lower bound.
      const double bound = frontier.BoundAt(deadline);
      EXPECT_LE(bound, exact.energy_j * (1 + 1e-9))
          << "relaxation bound above the exact optimum " << exact.energy_j;
      // (b) quality.
      const double ratio = planned.energy_j / exact.energy_j;
      ++tally.total;
      if (ratio <= 1.01) ++tally.within;
      if (ratio <= 1 + 1e-9) ++tally.exact;
      tally.sum_gap += ratio - 1;
      tally.loosest_bound = std::min(tally.loosest_bound, bound / exact.energy_j);
      if (ratio > tally.worst) {
        tally.worst = ratio;
        tally.worst_label = in.label;
      }
    }
  }
  EXPECT_GE(gpipe, 10);
  EXPECT_EQ(largest, 24);  // S=3, M=4 is covered
  for (const Tally& tally : tallies) {
    const double fraction = static_cast<double>(tally.within) / tally.total;
    std::printf(
        "[brute force] deadline %s: within 1%% of the optimum %d/%d = %.1f%% (optimal %d); mean "
        "gap %.4f%%; worst ratio %.5f (%s); loosest bound/optimum %.5f; %ld labels\n",
        tally.name, tally.within, tally.total, 100 * fraction, tally.exact,
        100 * tally.sum_gap / tally.total, tally.worst, tally.worst_label.c_str(),
        tally.loosest_bound, tally.labels);
    EXPECT_GE(fraction, tally.required) << "deadline " << tally.name;
  }
}

// ExactSearch itself against plain enumeration of every assignment, on
// instances small enough to enumerate: 16 2x2 pipelines with 3-4 clocks, two
// 2x3 and two 3x2 pipelines cut to 3 clocks (<= 3^12 assignments). Searched with no
// incumbent, with the all-max-clock plan, and with the best assignment
// strictly worse than the optimum (the tightest incumbent that must not hide
// the optimum), so every pruning path is exercised.
TEST(BruteForce, ExactSearchAgreesWithFullEnumeration) {
  for (int i = 0; i < 20; ++i) {
    Instance in = MakeInstance(1000 + i, i < 18 ? 2 : 3, i < 16 ? 2 : i < 18 ? 3 : 2);
    in.spec.kind = i % 4 == 3 ? schedule::Kind::kGPipe : schedule::Kind::k1F1B;
    if (in.spec.stages * in.spec.microbatches > 4) {
      model::Profile cut;  // the three highest clocks of each (stage, kind)
      for (int s = 0; s < in.spec.stages; ++s) {
        for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
          const auto& points = in.profile.Points(s, kind);
          for (size_t j = 0; j < 3; ++j) cut.Add(s, kind, points[j]);
        }
      }
      in.profile = cut;
    }
    const schedule::Schedule sched = schedule::Build(in.spec);
    SCOPED_TRACE(in.label);
    const int n = sched.num_nodes();
    std::vector<const std::vector<model::ClockPoint>*> points(n);
    for (int node = 0; node < n; ++node) {
      points[node] = &in.profile.Points(sched.nodes[node].stage, sched.nodes[node].kind);
    }
    // Every assignment's exact time and energy (digit of node 0 varies fastest).
    std::vector<Evaluation> all;
    std::vector<int> digit(n, 0);
    std::vector<double> finish(n);
    while (true) {
      double makespan = 0, energy = 0, busy = 0;
      for (int node : sched.topological_order) {
        const model::ClockPoint& p = (*points[node])[digit[node]];
        double start = 0;
        for (int q : sched.predecessors[node]) start = std::max(start, finish[q]);
        finish[node] = start + p.time_s;
        makespan = std::max(makespan, finish[node]);
        energy += p.energy_j;
        busy += p.time_s;
      }
      all.push_back({makespan, energy + in.p_block_w * (in.spec.stages * makespan - busy)});
      int k = 0;
      while (k < n && ++digit[k] == static_cast<int>(points[k]->size())) digit[k++] = 0;
      if (k == n) break;
    }
    std::vector<std::uint16_t> max_mhz(n);
    for (int node = 0; node < n; ++node) max_mhz[node] = points[node]->front().mhz;
    const double t0 = Evaluate(sched, in.profile, in.p_block_w, max_mhz).time_s;
    // Assignment number -> clocks (digit 0 varies fastest).
    auto clocks_of = [&](long index) {
      std::vector<std::uint16_t> out(n);
      for (int node = 0; node < n; ++node) {
        const long size = static_cast<long>(points[node]->size());
        out[node] = (*points[node])[index % size].mhz;
        index /= size;
      }
      return out;
    };
    ExactSearch search(sched, in.profile, in.p_block_w);
    for (double factor : {1.0, 1.05, 1.1, 1.5}) {
      const double deadline = factor * t0;
      long best = -1, runner_up = -1;
      for (long a = 0; a < static_cast<long>(all.size()); ++a) {
        if (all[a].time_s > deadline * (1 + 1e-12)) continue;
        if (best < 0 || all[a].energy_j < all[best].energy_j) best = a;
      }
      ASSERT_GE(best, 0);
      const double optimum = all[best].energy_j;
      for (long a = 0; a < static_cast<long>(all.size()); ++a) {
        if (all[a].time_s > deadline * (1 + 1e-12) || all[a].energy_j <= optimum * (1 + 1e-9)) {
          continue;
        }
        if (runner_up < 0 || all[a].energy_j < all[runner_up].energy_j) runner_up = a;
      }
      EXPECT_LE(Relative(search.Solve(deadline).energy_j, optimum), 1e-12) << "factor " << factor;
      EXPECT_LE(Relative(search.Solve(deadline, max_mhz).energy_j, optimum), 1e-12)
          << "factor " << factor;
      if (runner_up >= 0) {
        EXPECT_LE(Relative(search.Solve(deadline, clocks_of(runner_up)).energy_j, optimum), 1e-12)
            << "factor " << factor;
      }
    }
  }
}

}  // namespace
}  // namespace joulepipe::solver

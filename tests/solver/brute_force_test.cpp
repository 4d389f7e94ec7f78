// Acceptance test of the frontier planner against the exact optimum.
//
// 200 random tiny pipelines (2-3 stages, 2-4 microbatches, mostly 1F1B, some
// GPipe; 3-4 clocks per (stage, kind)) with realistic DVFS-shaped profiles.
// The exact least-energy clock assignment for a deadline is found by an
// exhaustive branch-and-bound search over EVERY clock of every instruction
// (no Pareto or hull reduction taken from the solver), pruned only by valid
// bounds: a partial makespan that must exceed the deadline, or a partial
// energy lower bound that cannot beat the incumbent.
//
// For the zero-slowdown deadline T0 (all-max-clock makespan) the planner's
// best plan within T0 must never exceed T0, never beat the exact optimum
// (that would be an evaluation bug), be within 1% of it on >= 95% of the
// instances, and the relaxation bound must not exceed the optimum. At 1.05*T0
// (grid only) and 1.1*T0 (an extra deadline) the same, with >= 90%.
//
// Energy is DESIGN.md's: sum_i e_i + P_block * sum_stages (T - busy_s), GPU
// only, simulated from the synthetic profiles.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
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
void AddProfile(std::mt19937& rng, model::Profile& profile, int stage, model::Kind kind,
                double t0, double p_max) {
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

Instance MakeInstance(int index) {
  Instance in;
  in.seed = 7919 + index;
  std::mt19937 rng(in.seed);
  in.spec.kind = UniformInt(rng, 0, 5) == 0 ? schedule::Kind::kGPipe : schedule::Kind::k1F1B;
  in.spec.stages = UniformInt(rng, 2, 3);
  in.spec.microbatches = UniformInt(rng, 2, 4);
  in.spec.chunks = 1;
  in.p_block_w = Uniform(rng, 50, 100);
  for (int s = 0; s < in.spec.stages; ++s) {
    const double forward = Uniform(rng, 0.5, 1.0);
    const double backward = forward * Uniform(rng, 1.8, 2.0);
    AddProfile(rng, in.profile, s, model::Kind::kForward, forward, Uniform(rng, 200, 400));
    AddProfile(rng, in.profile, s, model::Kind::kBackward, backward, Uniform(rng, 200, 400));
  }
  in.label = "seed " + std::to_string(in.seed) + " (" +
             std::string(schedule::KindName(in.spec.kind)) + ", S=" +
             std::to_string(in.spec.stages) + ", M=" + std::to_string(in.spec.microbatches) +
             ", P_block=" + std::to_string(in.p_block_w) + ")";
  return in;
}

struct Exact {
  double energy_j = kInf;  // +inf if no assignment meets the deadline
  double time_s = 0;
  std::vector<std::uint16_t> mhz;  // per schedule node id
  long leaves = 0;
};

// Exhaustive search over all clock assignments in topological order.
class ExactSearch {
 public:
  ExactSearch(const schedule::Schedule& schedule, const model::Profile& profile, double p_block_w)
      : schedule_(schedule), p_block_(p_block_w), n_(schedule.num_nodes()) {
    std::vector<int> pos(n_);
    for (int k = 0; k < n_; ++k) pos[schedule.topological_order[k]] = k;
    options_.resize(n_);
    preds_.resize(n_);
    std::vector<std::vector<int>> succs(n_);
    t_min_.assign(n_, kInf);
    est_.assign(n_, 0);
    for (int k = 0; k < n_; ++k) {
      const int node = schedule.topological_order[k];
      const model::Instruction& ins = schedule.nodes[node];
      for (const model::ClockPoint& p : profile.Points(ins.stage, ins.kind)) {
        options_[k].push_back({p.mhz, p.time_s, p.energy_j, p.energy_j - p_block_w * p.time_s});
        t_min_[k] = std::min(t_min_[k], p.time_s);
      }
      // Cheapest first: good incumbents early, stronger pruning.
      std::sort(options_[k].begin(), options_[k].end(),
                [](const Opt& x, const Opt& y) { return x.cost < y.cost; });
      for (int q : schedule.predecessors[node]) preds_[k].push_back(pos[q]);
      for (int q : schedule.successors[node]) succs[k].push_back(pos[q]);
    }
    // tail_after_[k]: longest path (fastest times) from k's end to the end.
    std::vector<double> tail(n_, 0);
    tail_after_.assign(n_, 0);
    for (int k = n_ - 1; k >= 0; --k) {
      for (int q : succs[k]) tail_after_[k] = std::max(tail_after_[k], tail[q]);
      tail[k] = t_min_[k] + tail_after_[k];
    }
  }

  Exact Solve(double deadline) {
    deadline_ = deadline;
    best_ = Exact{};
    finish_.assign(n_, 0);
    choice_.assign(n_, 0);
    Search(0, 0, 0);
    return best_;
  }

 private:
  struct Opt {
    int mhz;
    double time, energy, cost;
  };

  // Lower bound on the cost still to come (positions k..n-1) and on the
  // makespan, given the finish times of positions 0..k-1; false if some
  // remaining instruction has no clock that can still meet the deadline.
  bool Bound(int k, double& rest_cost, double& makespan_lb) {
    const double limit = deadline_ * (1 + 1e-9);
    rest_cost = 0;
    for (int u = k; u < n_; ++u) {
      double start = 0;
      for (int q : preds_[u]) start = std::max(start, q < k ? finish_[q] : est_[q] + t_min_[q]);
      est_[u] = start;
      const double room = limit - tail_after_[u] - start;
      const Opt* cheapest = nullptr;  // options ascend in cost
      for (const Opt& o : options_[u]) {
        if (o.time <= room) {
          cheapest = &o;
          break;
        }
      }
      if (cheapest == nullptr) return false;
      rest_cost += cheapest->cost;
      makespan_lb = std::max(makespan_lb, start + t_min_[u] + tail_after_[u]);
    }
    return true;
  }

  void Search(int k, double cost, double makespan_lb) {
    if (k == n_) {
      Leaf();
      return;
    }
    double rest_cost = 0;
    if (!Bound(k, rest_cost, makespan_lb)) return;  // every completion misses the deadline
    const double stages_pb = schedule_.spec.stages * p_block_;
    if (cost + rest_cost + stages_pb * makespan_lb >= best_.energy_j) return;
    const double start = est_[k];
    for (int j = 0; j < static_cast<int>(options_[k].size()); ++j) {
      const Opt& o = options_[k][j];
      const double finish = start + o.time;
      const double lb = std::max(makespan_lb, finish + tail_after_[k]);
      if (lb > deadline_ * (1 + 1e-9)) continue;
      finish_[k] = finish;
      choice_[k] = j;
      Search(k + 1, cost + o.cost, lb);
    }
  }

  void Leaf() {
    ++best_.leaves;
    double makespan = 0, energy = 0, busy = 0;
    for (int k = 0; k < n_; ++k) {
      const Opt& o = options_[k][choice_[k]];
      makespan = std::max(makespan, finish_[k]);
      energy += o.energy;
      busy += o.time;
    }
    if (makespan > deadline_ * (1 + 1e-12)) return;
    energy += p_block_ * (schedule_.spec.stages * makespan - busy);
    if (energy < best_.energy_j) {
      best_.energy_j = energy;
      best_.time_s = makespan;
      best_.mhz.assign(n_, 0);
      for (int k = 0; k < n_; ++k) {
        best_.mhz[schedule_.topological_order[k]] =
            static_cast<std::uint16_t>(options_[k][choice_[k]].mhz);
      }
    }
  }

  const schedule::Schedule& schedule_;
  const double p_block_;
  const int n_;
  std::vector<std::vector<Opt>> options_;  // [topological position]
  std::vector<std::vector<int>> preds_;    // positions
  std::vector<double> t_min_;       // fastest time per position
  std::vector<double> tail_after_;  // fastest path from a position's end to the end
  std::vector<double> est_;         // scratch: lower bound on start
  double deadline_ = 0;
  std::vector<double> finish_;
  std::vector<int> choice_;
  Exact best_;
};

// Independent plain evaluation of a clock assignment (DESIGN.md energy).
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

double Relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

struct Tally {
  const char* name;
  double factor;       // deadline = factor * T0
  double required;     // fraction of instances within 1% that must be met
  int within = 0;      // instances within 1% of the optimum
  int total = 0;
  double worst = 1;    // worst planner / optimum energy ratio
  std::string worst_label;
  double mean_gap = 0;  // mean (ratio - 1)
  long leaves = 0;      // exact search leaves visited
};

TEST(BruteForce, PlannerMatchesExactOptimumOnTinyPipelines) {
  std::vector<Tally> tallies = {{"T0", 1.0, 0.95}, {"1.05*T0 (grid)", 1.05, 0.90},
                                {"1.1*T0 (extra deadline)", 1.1, 0.90}};
  int gpipe = 0;
  for (int i = 0; i < kInstances; ++i) {
    const Instance in = MakeInstance(i);
    SCOPED_TRACE(in.label);
    const schedule::Schedule sched = schedule::Build(in.spec);
    if (in.spec.kind == schedule::Kind::kGPipe) ++gpipe;

    // T0, independently: every instruction at its highest clock.
    std::vector<std::uint16_t> max_mhz(sched.num_nodes()); fflush(stdout);
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
      const auto tic = std::chrono::steady_clock::now();
      const Exact exact = search.Solve(deadline);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - tic).count();
      if (sec > 0.02) std::printf("TMP %s %s leaves %ld %.3f s n=%d\n", in.label.c_str(), tally.name, exact.leaves, sec, sched.num_nodes()); fflush(stdout);
      tally.leaves += exact.leaves;
      ASSERT_TRUE(std::isfinite(exact.energy_j));  // all-max-clock meets every deadline >= T0
      // The exact optimum's own figures, re-evaluated, and through Replay.
      const Evaluation check = Evaluate(sched, in.profile, in.p_block_w, exact.mhz);
      EXPECT_LE(check.time_s, deadline * (1 + 1e-12));
      EXPECT_LE(Relative(check.energy_j, exact.energy_j), 1e-12);
      EXPECT_LE(exact.energy_j, base.energy_j * (1 + 1e-12));

      const FrontierPoint* best = frontier.BestWithin(deadline);
      ASSERT_NE(best, nullptr);
      // (a) exact time of the planner's plan never exceeds the deadline, and
      // its reported figures are the exact ones.
      const Evaluation planned = Evaluate(sched, in.profile, in.p_block_w, best->mhz);
      EXPECT_LE(planned.time_s, deadline * (1 + 1e-12));
      EXPECT_LE(Relative(best->time_s, planned.time_s), 1e-12);
      EXPECT_LE(Relative(best->energy_j, planned.energy_j), 1e-9);
      const schedule::ReplayResult replay =
          schedule::Replay(sched, in.profile, ToPlan(sched, *best), in.p_block_w);
      EXPECT_LE(Relative(replay.time_s, planned.time_s), 1e-9);
      EXPECT_LE(Relative(replay.energy_j, planned.energy_j), 1e-9);
      // (c) never below the true optimum.
      EXPECT_GE(planned.energy_j, exact.energy_j * (1 - 1e-9))
          << "planner beats the exhaustive optimum: evaluation bug";
      // (d) the relaxation is a lower bound.
      EXPECT_LE(frontier.BoundAt(deadline), exact.energy_j * (1 + 1e-9))
          << "relaxation bound above the exact optimum " << exact.energy_j;
      // (b) quality.
      const double ratio = planned.energy_j / exact.energy_j;
      ++tally.total;
      if (ratio <= 1.01) ++tally.within;
      tally.mean_gap += ratio - 1;
      if (ratio > tally.worst) {
        tally.worst = ratio;
        tally.worst_label = in.label;
      }
    }
  }
  EXPECT_GE(gpipe, 10);
  for (const Tally& tally : tallies) {
    const double fraction = static_cast<double>(tally.within) / tally.total;
    std::printf(
        "[brute force] deadline %-24s within 1%% of optimum: %d/%d = %.1f%%; mean gap %.4f%%; "
        "worst ratio %.5f (%s); exact search leaves %ld\n",
        tally.name, tally.within, tally.total, 100 * fraction, 100 * tally.mean_gap / tally.total,
        tally.worst, tally.worst_label.c_str(), tally.leaves);
    EXPECT_GE(fraction, tally.required) << "deadline " << tally.name;
  }
}

// The exhaustive search itself, against plain enumeration on instances small
// enough to enumerate every assignment (guards the pruning).
TEST(BruteForce, ExactSearchAgreesWithFullEnumeration) {
  for (int i = 0; i < 40; ++i) {
    Instance in = MakeInstance(1000 + i);
    in.spec.stages = 2;
    in.spec.microbatches = 2;  // 8 instructions, <= 4^8 assignments
    const schedule::Schedule sched = schedule::Build(in.spec);
    SCOPED_TRACE(in.label);
    const int n = sched.num_nodes();
    std::vector<const std::vector<model::ClockPoint>*> points(n);
    for (int node = 0; node < n; ++node) {
      points[node] = &in.profile.Points(sched.nodes[node].stage, sched.nodes[node].kind);
    }
    std::vector<std::uint16_t> max_mhz(n);
    for (int node = 0; node < n; ++node) max_mhz[node] = points[node]->front().mhz;
    const double t0 = Evaluate(sched, in.profile, in.p_block_w, max_mhz).time_s;
    ExactSearch search(sched, in.profile, in.p_block_w);
    for (double factor : {1.0, 1.1, 1.5}) {
      double best = kInf;
      std::vector<int> digit(n, 0);
      std::vector<std::uint16_t> mhz(n);
      while (true) {
        for (int node = 0; node < n; ++node) mhz[node] = (*points[node])[digit[node]].mhz;
        const Evaluation e = Evaluate(sched, in.profile, in.p_block_w, mhz);
        if (e.time_s <= factor * t0 * (1 + 1e-12)) best = std::min(best, e.energy_j);
        int k = 0;
        while (k < n && ++digit[k] == static_cast<int>(points[k]->size())) digit[k++] = 0;
        if (k == n) break;
      }
      EXPECT_LE(Relative(search.Solve(factor * t0).energy_j, best), 1e-12) << "factor " << factor;
    }
  }
}

}  // namespace
}  // namespace joulepipe::solver

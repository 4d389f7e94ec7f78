// The relaxation's warm-started cuts (WarmMinCut, the default) against cold
// solves of every step: the series-contracted Dinic that the solver used
// before, and LEMON's push-relabel oracle. The minimal minimum cut does not
// depend on which maximum flow found it, so all three must walk the same
// steps to the same curve (up to round-off).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "../../src/solver/activity_graph.hpp"
#include "../../src/solver/relaxation.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "oracle/min_cut_lemon.hpp"
#include "random_case.hpp"

namespace joulepipe::solver {
namespace {

// The relaxed energy at makespan t: linear between the curve's breakpoints,
// which descend in time.
double EnergyAt(const Relaxation& r, double t) {
  const auto& c = r.curve;
  if (t >= c.front().time_s) return c.front().energy_j;
  for (size_t k = 1; k < c.size(); ++k) {
    if (c[k].time_s <= t) {
      const double span = c[k - 1].time_s - c[k].time_s;
      const double w = span > 0 ? (t - c[k].time_s) / span : 0;
      return c[k].energy_j + w * (c[k - 1].energy_j - c[k].energy_j);
    }
  }
  return c.back().energy_j;
}

void ExpectSameCurve(const Relaxation& warm, const Relaxation& cold, const std::string& what) {
  const double scale = std::abs(cold.curve.front().energy_j) + 1;
  const double t_scale = cold.curve.front().time_s + 1e-9;
  EXPECT_NEAR(warm.t_min, cold.t_min, 1e-9 * t_scale) << what;
  EXPECT_NEAR(warm.curve.front().time_s, cold.curve.front().time_s, 1e-12 * t_scale) << what;
  // Compare on both curves' breakpoints: a different number of steps (a tie
  // split in two) is fine, a different curve is not.
  for (const Relaxation* r : {&warm, &cold}) {
    for (const BoundPoint& p : r->curve) {
      if (p.time_s < std::max(warm.t_min, cold.t_min)) continue;
      EXPECT_NEAR(EnergyAt(warm, p.time_s), EnergyAt(cold, p.time_s), 1e-9 * scale)
          << what << " at T = " << p.time_s;
    }
  }
}

TEST(Relaxation, WarmStartedCutsGiveTheColdSolvesCurve) {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 90; ++trial) {
    const schedule::Kind kind = static_cast<schedule::Kind>(trial % 3);
    const Case c = RandomCase(rng, kind);
    SCOPED_TRACE(c.name);
    const ActivityGraph g = BuildActivityGraph(c.schedule, c.profile, c.p_block_w);
    const Relaxation warm = SolveRelaxation(g, c.p_block_w);
    const Relaxation dinic = SolveRelaxation(g, c.p_block_w, MinCutWithLowerBounds);
    const Relaxation lemon = SolveRelaxation(g, c.p_block_w, MinCutWithLowerBoundsLemon);
    ExpectSameCurve(warm, dinic, "warm vs cold Dinic");
    ExpectSameCurve(warm, lemon, "warm vs LEMON");
  }
}

// A pipeline big enough that the warm start carries flow over thousands of
// steps (round-off accumulates across them, if anywhere).
TEST(Relaxation, WarmStartHoldsOverALongCrash) {
  std::mt19937 rng(7);
  schedule::Spec spec;
  spec.kind = schedule::Kind::k1F1B;
  spec.stages = 6;
  spec.microbatches = 24;
  const schedule::Schedule schedule = schedule::Build(spec);
  model::Profile profile;
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  for (int s = 0; s < spec.stages; ++s) {
    for (model::Kind k : {model::Kind::kForward, model::Kind::kBackward}) {
      const double t0 = (k == model::Kind::kForward ? 0.05 : 0.1) * (1 + 0.1 * s);
      for (int i = 0; i < 30; ++i) {
        const double f = 1410 - 15 * i;
        const double time = t0 * (0.4 + 0.6 * 1410 / f) * noise(rng);
        profile.Add(
            s, k,
            {static_cast<int>(f), time, (80 + 300 * std::pow(f / 1410, 2.5)) * time * noise(rng)});
      }
    }
  }
  const ActivityGraph g = BuildActivityGraph(schedule, profile, 60);
  const Relaxation warm = SolveRelaxation(g, 60);
  const Relaxation cold = SolveRelaxation(g, 60, MinCutWithLowerBounds);
  EXPECT_GT(cold.steps.size(), 500u);
  ExpectSameCurve(warm, cold, "6 x 24 1F1B, 30 clocks");
}

}  // namespace
}  // namespace joulepipe::solver

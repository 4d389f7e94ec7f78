// PipelineBound (src/tune/energy_bound.hpp): below every real plan's energy
// at its time, and below the planner's exact relaxation (which it relaxes
// further), on random pipelines of all three schedules.
#include "../../src/tune/energy_bound.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../test_support/profiles.hpp"
#include "joulepipe/schedule/clock_plans.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::tune {
namespace {

using model::Kind;
using model::testing::Point;

constexpr double kPBlock = 70.0;

model::Profile RandomProfile(int rows, std::mt19937* rng) {
  std::uniform_real_distribution<double> jitter(0.6, 1.6);
  model::Profile profile;
  for (int s = 0; s < rows; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const double base = (kind == Kind::kForward ? 0.04 : 0.09) * jitter(*rng);
      const double beta = 0.4 + 0.5 * jitter(*rng) / 1.6;  // compute share
      for (int mhz = 900; mhz <= 1500; mhz += 100) {
        const double t = base * (beta * 1500.0 / mhz + 1 - beta);
        const double power = 110 + 260 * std::pow(mhz / 1500.0, 2.4) * jitter(*rng) / 1.1;
        profile.Add(s, kind, Point(mhz, t, t * power));
      }
    }
  }
  return profile;
}

TEST(PipelineBound, IsBelowEveryPlanAndBelowTheRelaxation) {
  std::mt19937 rng(11);
  int plans = 0;
  for (int trial = 0; trial < 24; ++trial) {
    schedule::Spec spec;
    spec.kind = static_cast<schedule::Kind>(trial % 3);
    spec.stages = 2 + trial % 4;
    spec.chunks = spec.kind == schedule::Kind::kInterleaved ? 2 : 1;
    spec.microbatches = spec.stages * (1 + trial % 3);
    const schedule::Schedule schedule = schedule::Build(spec);
    const model::Profile profile = RandomProfile(spec.stages * spec.chunks, &rng);
    const PipelineBound bound(schedule, profile, kPBlock);

    const std::vector<std::uint16_t> fastest = schedule::UniformClocks(schedule, profile, true);
    const solver::Evaluation full = solver::EvaluateClocks(schedule, profile, kPBlock, fastest);
    EXPECT_NEAR(bound.fastest_s(), full.time_s, 1e-9 * full.time_s);
    EXPECT_LE(bound.AtMost(full.time_s), full.energy_j * (1 + 1e-12));
    EXPECT_TRUE(std::isinf(bound.AtMost(0.99 * full.time_s)));

    // Random clock plans.
    std::uniform_int_distribution<int> clock(0, 6);
    for (int k = 0; k < 40; ++k) {
      std::vector<std::uint16_t> mhz(schedule.num_nodes());
      for (auto& m : mhz) m = static_cast<std::uint16_t>(900 + 100 * clock(rng));
      const solver::Evaluation e = solver::EvaluateClocks(schedule, profile, kPBlock, mhz);
      EXPECT_LE(bound.AtMost(e.time_s), e.energy_j * (1 + 1e-12)) << "trial " << trial;
      ++plans;
    }
    // The frontier's plans and its relaxation: this bound relaxes the
    // relaxation further (stages apart), so it is never above it.
    solver::Options options;
    options.p_block_w = kPBlock;
    options.resolution_s = 5e-3;
    const solver::Frontier frontier = solver::SolveFrontier(schedule, profile, options);
    for (const solver::FrontierPoint& p : frontier.points) {
      EXPECT_LE(bound.AtMost(p.time_s), p.energy_j * (1 + 1e-12));
      EXPECT_LE(bound.AtMost(p.time_s), frontier.BoundAt(p.time_s) * (1 + 1e-9) + 1e-9);
    }
    // Non-increasing in the deadline.
    double last = bound.AtMost(full.time_s);
    for (double f = 1.01; f < 1.6; f += 0.05) {
      const double v = bound.AtMost(f * full.time_s);
      EXPECT_LE(v, last * (1 + 1e-12));
      last = v;
    }
  }
  EXPECT_EQ(plans, 24 * 40);
}

TEST(PipelineBound, IsTightWhenNothingCanSlowDown) {
  // One stage, one clock per instruction: the bound is the plan's energy.
  model::Profile profile;
  profile.Add(0, Kind::kForward, Point(1400, 0.1, 30));
  profile.Add(0, Kind::kBackward, Point(1400, 0.2, 70));
  schedule::Spec spec;
  spec.kind = schedule::Kind::k1F1B;
  spec.stages = 1;
  spec.microbatches = 4;
  const schedule::Schedule schedule = schedule::Build(spec);
  const PipelineBound bound(schedule, profile, kPBlock);
  EXPECT_NEAR(bound.fastest_s(), 1.2, 1e-12);
  EXPECT_NEAR(bound.AtMost(1.2), 400, 1e-9);
  EXPECT_NEAR(bound.AtMost(5.0), 400, 1e-9);  // waiting longer never helps
}

}  // namespace
}  // namespace joulepipe::tune

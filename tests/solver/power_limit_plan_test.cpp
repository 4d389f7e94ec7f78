// Power-limit plans (power_limit_plan.hpp) against exhaustive enumeration of
// every per-stage limit combination, and against the clock frontier: a limit
// plan is a clock plan with one clock per (stage, kind), so it can never beat
// the clock frontier's relaxation bound.

#include "joulepipe/solver/power_limit_plan.hpp"
#include "joulepipe/schedule/clock_plans.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "random_case.hpp"

namespace joulepipe::solver {
namespace {

TEST(ClockUnderLimit, HighestClockWithinTheLimit) {
  // Powers: 1410 MHz 400 W, 1200 MHz 300 W, 1000 MHz 200 W.
  const std::vector<model::ClockPoint> rows = {{1410, 0.1, 40}, {1200, 0.1, 30}, {1000, 0.1, 20}};
  EXPECT_EQ(ClockUnderLimit(rows, 500), 1410);
  EXPECT_EQ(ClockUnderLimit(rows, 400), 1410);
  EXPECT_EQ(ClockUnderLimit(rows, 399), 1200);
  EXPECT_EQ(ClockUnderLimit(rows, 250), 1000);
  EXPECT_EQ(ClockUnderLimit(rows, 199), 0);
}

// Every per-stage option combination, Pareto-filtered: (time, energy).
std::vector<std::pair<double, double>> Exhaustive(const Case& c, const LimitFrontier& f) {
  const int stages = c.schedule.spec.stages;
  std::vector<int> state(stages, 0);
  std::vector<std::pair<double, double>> all;
  for (;;) {
    std::vector<std::uint16_t> mhz(c.schedule.num_nodes());
    for (int node = 0; node < c.schedule.num_nodes(); ++node) {
      const model::Instruction& ins = c.schedule.nodes[node];
      const auto& rows = f.rows[ins.stage];
      int r = 0;
      const int p = schedule::ProfileStage(c.schedule.spec, c.profile.num_stages(), ins);
      while (rows[r].kind != ins.kind || rows[r].profile_stage != p) ++r;
      mhz[node] = static_cast<std::uint16_t>(f.options[ins.stage][state[ins.stage]].mhz[r]);
    }
    const Evaluation e = EvaluateClocks(c.schedule, c.profile, c.p_block_w, mhz);
    all.push_back({e.time_s, e.energy_j});
    int s = 0;
    while (s < stages && ++state[s] == static_cast<int>(f.options[s].size())) state[s++] = 0;
    if (s == stages) break;
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<double, double>> pareto;
  for (const auto& p : all) {
    if (pareto.empty() || p.second < pareto.back().second) pareto.push_back(p);
  }
  return pareto;
}

TEST(SolveLimitFrontier, FiguresAreExactAndOptionsAreWhatTheLimitGives) {
  std::mt19937 rng(7);
  for (int i = 0; i < 30; ++i) {
    const Case c = RandomCase(rng, static_cast<schedule::Kind>(i % 3));
    LimitPlanOptions options;
    options.p_block_w = c.p_block_w;
    const LimitFrontier f = SolveLimitFrontier(c.schedule, c.profile, options);
    ASSERT_FALSE(f.points.empty()) << c.name;
    for (std::size_t s = 0; s < f.options.size(); ++s) {
      EXPECT_EQ(f.options[s][0].watts, 0) << c.name;
      for (std::size_t j = 1; j < f.options[s].size(); ++j) {
        const LimitOption& o = f.options[s][j];
        EXPECT_LT(o.watts, j > 1 ? f.options[s][j - 1].watts : 1e9) << c.name;
        for (std::size_t r = 0; r < f.rows[s].size(); ++r) {
          const auto& points = c.profile.Points(f.rows[s][r].profile_stage, f.rows[s][r].kind);
          EXPECT_EQ(ClockUnderLimit(points, o.watts), o.mhz[r]) << c.name;
        }
      }
    }
    for (const LimitPoint& p : f.points) {
      const Evaluation e = EvaluateClocks(c.schedule, c.profile, c.p_block_w, p.mhz);
      EXPECT_NEAR(e.time_s, p.time_s, 1e-12 * p.time_s) << c.name;
      EXPECT_NEAR(e.energy_j, p.energy_j, 1e-9 * p.energy_j) << c.name;
    }
    const Evaluation max = EvaluateClocks(c.schedule, c.profile, c.p_block_w,
                                          schedule::UniformClocks(c.schedule, c.profile, true));
    EXPECT_NEAR(f.defaults.time_s, max.time_s, 1e-12 * max.time_s) << c.name;
    EXPECT_NEAR(f.defaults.energy_j, max.energy_j, 1e-9 * max.energy_j) << c.name;
  }
}

// The requested deadlines (same time, 5, 10 and 20 % slower) are what a
// user runs: there the search must be close to exhaustive. Between them the
// frontier is coarser (a staircase of the grid deadlines).
TEST(SolveLimitFrontier, CloseToExhaustiveAndNeverBelowTheClockBound) {
  std::mt19937 rng(11);
  int cases = 0, compared = 0, within = 0, grid_compared = 0, grid_within = 0;
  double worst = 0, grid_worst = 0;
  const double factors[] = {1.0, 1.05, 1.1, 1.2};
  while (cases < 60) {
    const Case c = RandomCase(rng, static_cast<schedule::Kind>(cases % 3));
    LimitPlanOptions options;
    options.p_block_w = c.p_block_w;
    const Evaluation max = EvaluateClocks(c.schedule, c.profile, c.p_block_w,
                                          schedule::UniformClocks(c.schedule, c.profile, true));
    for (double x : factors) options.deadlines_s.push_back(x * max.time_s);
    const LimitFrontier f = SolveLimitFrontier(c.schedule, c.profile, options);
    double combinations = 1;
    for (const auto& o : f.options) combinations *= o.size();
    if (combinations > 20000 || combinations < 4) continue;
    ++cases;
    const auto exact = Exhaustive(c, f);
    Options clock_options;
    clock_options.p_block_w = c.p_block_w;
    clock_options.resolution_s = 1e-3;
    const Frontier clocks = SolveFrontier(c.schedule, c.profile, clock_options);
    auto exact_within = [&](double t) {
      double best = -1;
      for (const auto& [te, e] : exact) {
        if (te <= t) best = e;
      }
      return best;
    };
    for (double x : factors) {
      const double d = x * max.time_s;
      const LimitPoint* p = f.BestWithin(d);
      ASSERT_NE(p, nullptr) << c.name;
      const double gap = p->energy_j / exact_within(d) - 1;
      EXPECT_GE(gap, -1e-9) << c.name;  // better than every combination: an evaluation bug
      worst = std::max(worst, gap);
      ++compared;
      within += gap <= 0.005;
    }
    for (const auto& [t, e] : exact) {
      // Faster than the defaults happens only where profile noise makes a
      // lower clock faster; the search starts from the defaults.
      if (t < f.defaults.time_s) continue;
      const LimitPoint* p = f.BestWithin(t * (1 + 1e-12));
      ASSERT_NE(p, nullptr) << c.name;
      const double gap = p->energy_j / e - 1;
      EXPECT_GE(gap, -1e-9) << c.name;
      grid_worst = std::max(grid_worst, gap);
      ++grid_compared;
      grid_within += gap <= 0.01;
    }
    for (const LimitPoint& p : f.points) {
      EXPECT_GE(p.energy_j, clocks.BoundAt(p.time_s) * (1 - 1e-9)) << c.name;
    }
  }
  std::printf(
      "power-limit plans vs exhaustive, 60 pipelines: at the requested deadlines %d of %d within "
      "0.5%%, worst %.3f%%; over the whole exhaustive frontier %d of %d within 1%%, worst %.3f%%\n",
      within, compared, 100 * worst, grid_within, grid_compared, 100 * grid_worst);
  EXPECT_GE(within, 0.97 * compared);
  EXPECT_LE(worst, 0.01);
  EXPECT_GE(grid_within, 0.8 * grid_compared);
}

TEST(SolveLimitFrontier, TheFloorAndBadOptions) {
  std::mt19937 rng(3);
  const Case c = RandomCase(rng, schedule::Kind::k1F1B);
  LimitPlanOptions options;
  options.p_block_w = c.p_block_w;
  options.min_limit_w = 1e6;  // above every row: only the default is left
  const LimitFrontier f = SolveLimitFrontier(c.schedule, c.profile, options);
  for (const auto& o : f.options) EXPECT_EQ(o.size(), 1u);
  EXPECT_EQ(f.points.size(), 1u);
  options.min_limit_w = -1;
  EXPECT_THROW(SolveLimitFrontier(c.schedule, c.profile, options), model::InputError);
  options.min_limit_w = 0;
  options.deadlines_s = {0};
  EXPECT_THROW(SolveLimitFrontier(c.schedule, c.profile, options), model::InputError);
}

// The task: the limit plan the goal asks for on the frontier the solver
// gives, the clock plan of the same request beside it, and the goals a
// limit plan cannot meet refused by name before anything is solved.
TEST(PlanPowerLimits, ChoosesTheGoalsPointAndComparesWithClocks) {
  std::mt19937 rng(5);
  for (int i = 0; i < 12; ++i) {
    const Case c = RandomCase(rng, static_cast<schedule::Kind>(i % 3));
    PowerLimitRequest request;
    request.plan.spec = c.schedule.spec;
    request.plan.p_block_w = c.p_block_w;
    request.plan.slowdown = 0.1;
    request.plan.resolution_s = 1e-3;
    const PowerLimitPlan plan = PlanPowerLimits(c.profile, request);
    const PipelinePlan clocks = PlanPipeline(c.profile, request.plan);
    EXPECT_EQ(plan.clocks.chosen, clocks.chosen) << c.name;
    EXPECT_NEAR(plan.clocks.deadline_s, 1.1 * clocks.baseline.time_s, 1e-12) << c.name;
    const LimitPoint* best = plan.limits.BestWithin(plan.clocks.deadline_s);
    ASSERT_NE(best, nullptr) << c.name;
    EXPECT_EQ(&plan.limits.points[plan.chosen], best) << c.name;

    request.plan.slowdown = 0;
    request.plan.objective.goal = model::Goal::kLeastEnergy;
    request.compare_clocks = false;
    const PowerLimitPlan least = PlanPowerLimits(c.profile, request);
    EXPECT_EQ(least.chosen, least.limits.points.size() - 1) << c.name;
    EXPECT_TRUE(least.clocks.frontier.points.empty()) << c.name;  // not solved
  }
  auto field = [](const PowerLimitRequest& r) {
    try {
      CheckPowerLimitRequest(r);
    } catch (const model::InputError& e) {
      return e.field();
    }
    return std::string("none");
  };
  PowerLimitRequest r;
  r.plan.p_block_w = 60;
  EXPECT_EQ(field(r), "none");
  r.plan.objective.goal = model::Goal::kEnergyBudget;
  r.plan.objective.energy_budget_j = 10;
  EXPECT_EQ(field(r), "Objective::energy_budget_j");
  r.plan.objective = {};
  r.plan.objective.host_power_w = 150;
  EXPECT_EQ(field(r), "Objective::host_power_w");
  r.plan.objective = {};
  r.min_limit_w = 300;
  r.max_limit_w = 200;
  EXPECT_EQ(field(r), "PowerLimitRequest::min_limit_w");
}

}  // namespace
}  // namespace joulepipe::solver

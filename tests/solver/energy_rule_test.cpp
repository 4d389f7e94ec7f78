// The energy rule (model/energy.hpp) is defined once for the planner and the
// simulator; the replay evaluator (schedule/replay.cpp) keeps its own copy on
// purpose. On random plans of random GPipe, 1F1B and interleaved schedules
// this checks that every form agrees (1e-9 relative):
//   * solver::EvaluateClocks and schedule::Replay (time and energy);
//   * model::IterationEnergyJ / BlockingEnergyJ and Replay's busy + blocking
//     split;
//   * the rounder's EvaluateChoice (ActivityGraph positions, Pareto indices)
//     and EvaluateClocks (schedule node ids, clocks);
//   * the relaxation's effective-energy form (sum of hull costs + S P_block T)
//     and the rule, where the relaxation sits on real clocks (at T_max).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../../src/solver/activity_graph.hpp"
#include "../../src/solver/relaxation.hpp"
#include "../../src/solver/rounding.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "random_case.hpp"

namespace joulepipe::solver {
namespace {

constexpr double kTolerance = 1e-9;

// |a - b| within kTolerance of `scale` (the magnitude the figures add up to,
// so that a part near zero is not held to a relative bound of its own).
void ExpectClose(double a, double b, double scale, const std::string& what) {
  EXPECT_LE(std::abs(a - b), kTolerance * std::max(std::abs(scale), 1e-300))
      << what << ": " << a << " vs " << b;
}

// A random clock per schedule node, from its profile row.
std::vector<std::uint16_t> RandomClocks(const Case& c, std::mt19937& rng) {
  const schedule::Schedule& sched = c.schedule;
  std::vector<std::uint16_t> mhz(sched.num_nodes());
  for (int node = 0; node < sched.num_nodes(); ++node) {
    const model::Instruction& ins = sched.nodes[node];
    const auto& points =
        c.profile.Points(schedule::ProfileStage(sched.spec, c.profile.num_stages(), ins), ins.kind);
    mhz[node] = static_cast<std::uint16_t>(
        points[std::uniform_int_distribution<std::size_t>(0, points.size() - 1)(rng)].mhz);
  }
  return mhz;
}

// Sum of the instructions' profiled times under `mhz`: the busy seconds of
// the rule, computed here independently of both evaluators.
double BusySeconds(const Case& c, const std::vector<std::uint16_t>& mhz) {
  double busy = 0;
  for (int node = 0; node < c.schedule.num_nodes(); ++node) {
    const model::Instruction& ins = c.schedule.nodes[node];
    const int row = schedule::ProfileStage(c.schedule.spec, c.profile.num_stages(), ins);
    busy += c.profile.Find(row, ins.kind, mhz[node])->time_s;
  }
  return busy;
}

void CheckRandomPlans(schedule::Kind kind, unsigned seed) {
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 40; ++trial) {
    const Case c = RandomCase(rng, kind);
    SCOPED_TRACE(c.name);
    const double stages = c.schedule.spec.stages;
    for (int plan = 0; plan < 5; ++plan) {
      FrontierPoint point;
      point.mhz = RandomClocks(c, rng);
      const Evaluation evaluated = EvaluateClocks(c.schedule, c.profile, c.p_block_w, point.mhz);
      const schedule::ReplayResult replay =
          schedule::Replay(c.schedule, c.profile, ToPlan(c.schedule, point), c.p_block_w);
      ExpectClose(evaluated.time_s, replay.time_s, replay.time_s, "EvaluateClocks time");
      ExpectClose(evaluated.energy_j, replay.energy_j, replay.energy_j, "EvaluateClocks energy");

      const double busy_s = BusySeconds(c, point.mhz);
      ExpectClose(
          model::IterationEnergyJ(replay.busy_energy_j, busy_s, stages, replay.time_s, c.p_block_w),
          replay.energy_j, replay.energy_j, "IterationEnergyJ vs Replay");
      ExpectClose(model::BlockingEnergyJ(busy_s, stages, replay.time_s, c.p_block_w),
                  replay.blocking_energy_j, replay.energy_j, "BlockingEnergyJ vs Replay");
      ExpectClose(replay.busy_energy_j + replay.blocking_energy_j, replay.energy_j, replay.energy_j,
                  "Replay's split");
    }
  }
}

TEST(EnergyRule, EvaluateClocksReplayAndIterationEnergyAgreeOnGPipe) {
  CheckRandomPlans(schedule::Kind::kGPipe, 11);
}

TEST(EnergyRule, EvaluateClocksReplayAndIterationEnergyAgreeOn1F1B) {
  CheckRandomPlans(schedule::Kind::k1F1B, 12);
}

TEST(EnergyRule, EvaluateClocksReplayAndIterationEnergyAgreeOnInterleaved) {
  CheckRandomPlans(schedule::Kind::kInterleaved, 13);
}

// The rounder's evaluation (activity positions, indices into each hull's
// Pareto list) against EvaluateClocks (node ids, clocks) on random choices;
// and the relaxation's first curve point, where every activity sits at its
// cheapest hull vertex (a real clock), against the rule on that plan.
TEST(EnergyRule, RounderAndRelaxationUseTheSameRule) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 60; ++trial) {
    const schedule::Kind kind = static_cast<schedule::Kind>(trial % 3);
    const Case c = RandomCase(rng, kind);
    SCOPED_TRACE(c.name);
    const ActivityGraph g = BuildActivityGraph(c.schedule, c.profile, c.p_block_w);

    RoundedPlan random;
    random.choice.resize(g.n);
    FrontierPoint point;
    point.mhz.assign(c.schedule.num_nodes(), 0);
    for (int p = 0; p < g.n; ++p) {
      const std::vector<Option>& pareto = g.hulls[g.hull_of[p]].pareto;
      random.choice[p] =
          std::uniform_int_distribution<int>(0, static_cast<int>(pareto.size()) - 1)(rng);
      point.mhz[g.node_of[p]] = static_cast<std::uint16_t>(pareto[random.choice[p]].mhz);
    }
    EvaluateChoice(g, c.p_block_w, random);
    const Evaluation evaluated = EvaluateClocks(c.schedule, c.profile, c.p_block_w, point.mhz);
    ExpectClose(random.time_s, evaluated.time_s, evaluated.time_s, "EvaluateChoice time");
    ExpectClose(random.energy_j, evaluated.energy_j, evaluated.energy_j, "EvaluateChoice energy");

    const Relaxation relaxation = SolveRelaxation(g, c.p_block_w);
    RoundedPlan cheapest;
    cheapest.choice.resize(g.n);
    for (int p = 0; p < g.n; ++p) {
      const CostHull& hull = g.hulls[g.hull_of[p]];
      cheapest.choice[p] = hull.vertex_in_pareto.back();
    }
    EvaluateChoice(g, c.p_block_w, cheapest);
    ASSERT_FALSE(relaxation.curve.empty());
    ExpectClose(relaxation.curve.front().time_s, cheapest.time_s, cheapest.time_s,
                "relaxation T_max");
    ExpectClose(relaxation.curve.front().energy_j, cheapest.energy_j, cheapest.energy_j,
                "relaxation energy at T_max");
  }
}

// The one P_block check: the field it names, the range, and what it accepts.
TEST(EnergyRule, CheckPBlockNamesTheFieldAndTheRange) {
  for (double ok : {0.0, 83.64, 5000.0}) {
    EXPECT_NO_THROW(model::CheckPBlock(ok, "Options::p_block_w")) << ok;
  }
  for (double bad : {-1.0, 5000.5, std::nan(""), HUGE_VAL}) {
    try {
      model::CheckPBlock(bad, "Options::p_block_w");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const model::InputError& e) {
      EXPECT_EQ(e.field(), "Options::p_block_w");
      const std::string message = e.what();
      EXPECT_EQ(message.find("Options::p_block_w must be"), 0u) << message;
      EXPECT_NE(message.find("0..5000"), std::string::npos) << message;
      EXPECT_EQ(message.find("--"), std::string::npos) << message;
    }
  }
  // The planner checks through it.
  const schedule::Schedule sched = schedule::Build({schedule::Kind::k1F1B, 2, 2, 1});
  model::Profile profile;
  for (int s = 0; s < 2; ++s) {
    for (model::Kind k : {model::Kind::kForward, model::Kind::kBackward}) {
      model::ClockPoint point;
      point.mhz = 1410;
      point.time_s = 0.1;
      point.energy_j = 30;
      profile.Add(s, k, point);
    }
  }
  Options options;
  options.p_block_w = 1e6;
  try {
    SolveFrontier(sched, profile, options);
    ADD_FAILURE() << "accepted P_block 1e6";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "Options::p_block_w");
  }
}

}  // namespace
}  // namespace joulepipe::solver

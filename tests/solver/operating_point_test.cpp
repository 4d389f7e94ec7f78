// ChooseOperatingPoint on a hand-made frontier whose answers are worked out
// below, and each goal through PlanPipeline on a real profile.
#include "joulepipe/solver/operating_point.hpp"

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::solver {
namespace {

// Times 10..14 s, energies falling by less each second: 1000, 900, 840,
// 810, 800 J (GPU energy of 2 GPUs).
Frontier Hand() {
  Frontier f;
  const double e[] = {1000, 900, 840, 810, 800};
  for (int i = 0; i < 5; ++i) f.points.push_back({10.0 + i, e[i], {}, {}, {}});
  f.max_clock = f.points.front();
  return f;
}

TEST(OperatingPointTest, EachGoalPicksItsPoint) {
  const Frontier f = Hand();
  model::Objective o;
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 0u);    // same time
  EXPECT_EQ(ChooseOperatingPoint(f, o, 12.5, 2), 2u);  // within 1.25 x
  o.goal = model::Goal::kLeastEnergy;
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 4u);
  o = {};
  o.goal = model::Goal::kEnergyBudget;
  o.energy_budget_j = 850;  // the fastest at <= 850 J is 840 J at 12 s
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 2u);
  o = {};
  o.goal = model::Goal::kPowerBudget;
  o.power_budget_w = 80;  // powers: 100, 81.8, 70, 62.3, 57.1 W
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 2u);
  // A job of 10 such pipelines: the budget is ten times as large.
  o.power_budget_w = 800;
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2, 10), 2u);
}

TEST(OperatingPointTest, HostPowerMakesSlowPlansPayForTheirTime) {
  const Frontier f = Hand();
  model::Objective o;
  o.goal = model::Goal::kLeastEnergy;
  // 2 GPUs x 20 W: +40 J per second. Counted: 1400, 1340, 1320, 1330, 1360.
  o.host_power_w = 20;
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 2u);
  EXPECT_DOUBLE_EQ(model::CountedEnergyJ(12, 840, o, 2), 1320);
  EXPECT_EQ(model::EnergyScope(o), "GPU + host energy (host 20 W per GPU)");
  // Within 1.35 x: 10..13 s, least counted is 12 s.
  o.goal = model::Goal::kWithinDeadline;
  EXPECT_EQ(ChooseOperatingPoint(f, o, 13.5, 2), 2u);
  // Enough host power and the fastest plan is the least energy.
  o.goal = model::Goal::kLeastEnergy;
  o.host_power_w = 1000;
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 0u);
}

// The job waits 5 s per iteration for the all-reduce at 10 W per GPU: the
// power budget is the running job's, which draws less than its pipeline.
TEST(OperatingPointTest, BudgetsCountTheWaitOutsideThePipeline) {
  const Frontier f = Hand();
  model::Objective o;
  o.goal = model::Goal::kPowerBudget;
  o.power_budget_w = 60;  // pipeline alone: 100, 81.8, 70, 62.3, 57.1 W (point 4)
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 4u);
  o.outside_wait_s = 5;
  o.outside_wait_w = 10;  // + 100 J: (1100 / 15, 1000 / 16, 940 / 17, ...) = 73.3, 62.5, 55.3 W
  EXPECT_EQ(ChooseOperatingPoint(f, o, 10, 2), 2u);
  EXPECT_DOUBLE_EQ(model::CountedEnergyJ(12, 840, o, 2), 940);
  EXPECT_DOUBLE_EQ(model::CountedTimeS(12, o), 17);
  o.outside_wait_s = -1;
  EXPECT_THROW(ChooseOperatingPoint(f, o, 10, 2), model::InputError);
}

TEST(OperatingPointTest, BudgetsNoPlanMeetsSayTheLeastReached) {
  const Frontier f = Hand();
  model::Objective o;
  o.goal = model::Goal::kEnergyBudget;
  o.energy_budget_j = 500;
  try {
    ChooseOperatingPoint(f, o, 10, 2);
    FAIL() << "no plan uses 500 J";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "Objective::energy_budget_j");
    EXPECT_NE(std::string(e.what()).find("the least any plan uses is 800 J"), std::string::npos)
        << e.what();
  }
  o = {};
  o.goal = model::Goal::kPowerBudget;
  o.power_budget_w = 50;
  EXPECT_THROW(ChooseOperatingPoint(f, o, 10, 2), model::InputError);
}

TEST(OperatingPointTest, RefusesBudgetsThatAreNotTheGoalsAndBadHostPower) {
  model::Objective o;
  o.energy_budget_j = 100;  // set, but the goal is the deadline
  EXPECT_THROW(model::CheckObjective(o), model::InputError);
  o = {};
  o.goal = model::Goal::kPowerBudget;  // no budget given
  EXPECT_THROW(model::CheckObjective(o), model::InputError);
  o = {};
  o.host_power_w = -1;
  EXPECT_THROW(model::CheckObjective(o), model::InputError);
  o.host_power_w = 1e9;
  EXPECT_THROW(model::CheckObjective(o), model::InputError);
}

}  // namespace
}  // namespace joulepipe::solver

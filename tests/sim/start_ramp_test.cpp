// PlanStartRamp: the caps a shaped plan's start runs under, sized for a
// ramp limit, and FloorlessChoice.
#include <algorithm>
#include <cstdint>

#include <gtest/gtest.h>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/grid_plan.hpp"
#include "joulepipe/sim/grid_runtime_plan.hpp"

namespace joulepipe::sim {
namespace {

struct Fixture {
  Fixture() : profile(model::testing::UShapedProfile(4)) {
    schedule::Spec spec;
    spec.stages = 4;
    spec.microbatches = 8;
    schedule = schedule::Build(spec);
    plan.mhz.assign(static_cast<std::size_t>(schedule.num_nodes()), 1500);
    plan.time_s = 1;
  }
  model::Profile profile;
  schedule::Schedule schedule;
  CandidatePlan plan;
};

// Per step at most limit x window (but the first, from idle to the lowest
// clock's power, which no cap lowers), ascending, ending at the plan's own
// clocks; a tighter limit takes more steps.
TEST(StartRamp, StepsSizedForTheLimit) {
  Fixture f;
  StartRampRequest r;
  r.idle_w_per_gpu = 100;
  r.gpus_per_stage = 64;
  r.max_ramp_w_per_s = 20'000;  // 2 kW per 0.1 s step
  const StartRamp ramp = PlanStartRamp(f.schedule, f.profile, f.plan, r);
  ASSERT_GE(ramp.mhz.size(), 2u);
  EXPECT_TRUE(std::is_sorted(ramp.mhz.begin(), ramp.mhz.end()));
  EXPECT_EQ(ramp.mhz.back(), 1500);
  EXPECT_DOUBLE_EQ(ramp.step_s, 0.1);
  EXPECT_DOUBLE_EQ(ramp.idle_w, 100.0 * 64 * 4);
  EXPECT_GT(ramp.lowest_w, ramp.idle_w);
  // The profile's power: 150 + 300 (f/1500)^2.5 W per GPU, more with the
  // energy's U shape; computing at full clocks is far above idle.
  EXPECT_GT(ramp.power_w.back(), ramp.idle_w * 3);
  double before = ramp.idle_w;
  for (std::size_t j = 0; j < ramp.power_w.size(); ++j) {
    const double rise = ramp.power_w[j] - before;
    EXPECT_GE(rise, 0);
    if (j > 0) {
      // Discrete clocks: a step may hold where the next clock overshoots.
      EXPECT_LE(rise, ramp.largest_step_w + 1e-9);
    }
    before = ramp.power_w[j];
  }
  EXPECT_TRUE(ramp.first_is_largest);  // idle -> 900 MHz is the big jump here
  EXPECT_NEAR(ramp.ramp_w_per_s, ramp.largest_step_w / 0.1, 1e-6);

  StartRampRequest tighter = r;
  tighter.max_ramp_w_per_s = 5'000;
  EXPECT_GT(PlanStartRamp(f.schedule, f.profile, f.plan, tighter).mhz.size(), ramp.mhz.size());

  // A given length: steps of one window, whatever the limit.
  StartRampRequest given = r;
  given.seconds = 2;
  const StartRamp two = PlanStartRamp(f.schedule, f.profile, f.plan, given);
  EXPECT_EQ(two.mhz.size(), 20u);
  EXPECT_NEAR(two.seconds(), 2.0, 1e-12);

  // With idle above every clock's power (nothing to ramp): one step at the
  // plan's clocks when sized for a limit.
  StartRampRequest hot = r;
  hot.idle_w_per_gpu = 2'000;
  const StartRamp none = PlanStartRamp(f.schedule, f.profile, f.plan, hot);
  EXPECT_EQ(none.mhz, std::vector<int>({1500}));
  EXPECT_EQ(none.largest_step_w, 0);
}

TEST(StartRamp, CapsNeverRaiseAPlansClock) {
  Fixture f;
  f.plan.mhz.assign(f.plan.mhz.size(), 1050);  // every instruction at 1050
  StartRampRequest r;
  r.idle_w_per_gpu = 100;
  r.seconds = 1;
  const StartRamp ramp = PlanStartRamp(f.schedule, f.profile, f.plan, r);
  // Caps above 1050 leave the plan's power as it is.
  for (std::size_t j = 0; j < ramp.mhz.size(); ++j) {
    if (ramp.mhz[j] >= 1050) {
      EXPECT_DOUBLE_EQ(ramp.power_w[j], ramp.power_w.back());
    }
  }
}

TEST(StartRamp, BadRequestsNameTheirField) {
  Fixture f;
  StartRampRequest r;  // neither a limit nor a length
  try {
    PlanStartRamp(f.schedule, f.profile, f.plan, r);
    ADD_FAILURE() << "accepted a ramp with neither a limit nor a length";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "StartRampRequest::max_ramp_w_per_s");
  }
  r.seconds = 7200;
  try {
    PlanStartRamp(f.schedule, f.profile, f.plan, r);
    ADD_FAILURE() << "accepted a two-hour ramp";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "StartRampRequest::seconds");
  }
}

TEST(StartRamp, FloorlessChoiceIsTheLeastEnergyPairThatMeetsWithoutAFloor) {
  GridPlan plan;
  plan.unfloored.resize(4);
  plan.unfloored[0].energy_j = 10;  // meets
  plan.unfloored[0].meets = true;
  plan.unfloored[1].energy_j = 7;  // misses
  plan.unfloored[2].energy_j = 8;  // meets
  plan.unfloored[2].meets = true;
  plan.unfloored[3].energy_j = 7.5;  // meets, with an offset
  plan.unfloored[3].offset_s = 0.01;
  plan.unfloored[3].meets = true;
  ASSERT_NE(FloorlessChoice(plan), nullptr);
  EXPECT_EQ(FloorlessChoice(plan)->energy_j, 7.5);
  EXPECT_EQ(FloorlessChoice(plan)->offset_s, 0.01);
  for (ShapedPoint& p : plan.unfloored) p.meets = false;
  EXPECT_EQ(FloorlessChoice(plan), nullptr);
}

// The runtime's plan (PlanGridRuntime): the floorless pair's clocks and
// offset, waits held at each stage's highest all-max clock, and a start
// ramp (the same steps to stop) only when a ramp limit or a length asks.
TEST(StartRamp, TheRuntimePlanIsTheFloorlessPairWithItsShape) {
  Fixture f;
  solver::Frontier frontier;
  frontier.max_clock.mhz.assign(static_cast<std::size_t>(f.schedule.num_nodes()), 1980);
  frontier.max_clock.mhz[0] = 2010;  // a node of stage 0's
  CandidatePlan slow = f.plan;
  slow.time_s = 1.2;
  slow.energy_j = 80;
  const std::vector<CandidatePlan> candidates{f.plan, slow};
  GridPlan plan;
  plan.unshaped.resize(2);
  plan.unfloored.resize(2);
  plan.unfloored[1].candidate = 1;
  plan.unfloored[1].energy_j = 90;
  plan.unfloored[1].offset_s = 0.02;
  plan.unfloored[1].meets = true;
  JobSpec job;
  job.pipelines = 16;
  job.gpus_per_stage = 4;
  job.p_block_w = 100;

  GridRuntimePlanRequest none;  // no ramp limit, no length: no ramp
  const std::optional<GridRuntimePlan> a =
      PlanGridRuntime(f.schedule, f.profile, job, frontier, candidates, plan, none);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->point.offset_s, 0.02);
  EXPECT_EQ(a->candidate.time_s, 1.2);
  EXPECT_EQ(a->ramp, GridRuntimePlan::Ramp::kNone);
  ASSERT_TRUE(a->file.grid.has_value());
  EXPECT_EQ(a->file.grid->pipeline_offset_s, 0.02);
  ASSERT_EQ(a->file.grid->hold_mhz.size(), 4u);
  EXPECT_EQ(a->file.grid->hold_mhz[f.schedule.nodes[0].stage], 2010);
  EXPECT_EQ(std::count(a->file.grid->hold_mhz.begin(), a->file.grid->hold_mhz.end(), 1980), 3);
  EXPECT_EQ(a->file.grid->start_ramp_s, 0);
  ASSERT_TRUE(a->file.predicted.has_value());
  EXPECT_EQ(a->file.predicted->time_s, 1.2);

  GridRuntimePlanRequest ramped;
  ramped.grid.limits.max_ramp_w_per_s = 20'000;
  const std::optional<GridRuntimePlan> b =
      PlanGridRuntime(f.schedule, f.profile, job, frontier, candidates, plan, ramped);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->ramp, GridRuntimePlan::Ramp::kSteps);
  EXPECT_GT(b->file.grid->start_ramp_s, 0);
  EXPECT_EQ(b->file.grid->stop_ramp_s, b->file.grid->start_ramp_s);
  EXPECT_EQ(b->file.grid->start_ramp_mhz, b->start_ramp->mhz);

  plan.unfloored[1].meets = false;  // only a floor would meet: nothing the runtime can run
  EXPECT_FALSE(PlanGridRuntime(f.schedule, f.profile, job, frontier, candidates, plan, none));
}

}  // namespace
}  // namespace joulepipe::sim

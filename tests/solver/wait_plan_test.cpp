// PriceWaits: an uncalibrated model prices every frontier point as the solver
// did and chooses the same point; a calibrated one never prices a point
// higher, and its chosen plan's annotations are the lowered waits it counts.
#include "joulepipe/solver/wait_plan.hpp"

#include <gtest/gtest.h>

#include "../test_support/profiles.hpp"

namespace joulepipe::solver {
namespace {

using model::testing::Point;

// Stage s is (1 + 0.3 s) x slower than stage 0: unbalanced, so there are waits.
model::Profile Unbalanced(int stages) {
  return model::testing::FourClockProfile(stages, /*skew=*/0.3, /*watts=*/300);
}

PipelinePlan Solved(const model::Profile& profile) {
  PlanRequest request;
  request.spec.kind = schedule::Kind::k1F1B;
  request.spec.stages = 4;
  request.spec.microbatches = 8;
  request.p_block_w = 60;
  request.resolution_s = 1e-4;
  return PlanPipeline(profile, request);
}

TEST(PriceWaits, UncalibratedEqualsTheSolver) {
  const model::Profile profile = Unbalanced(4);
  const PipelinePlan plan = Solved(profile);
  const WaitPricing pricing = PriceWaits(profile, plan, model::FlatWaitModel(0));
  EXPECT_EQ(pricing.waits.p_block_w, 60);
  ASSERT_EQ(pricing.energy_j.size(), plan.frontier.points.size());
  for (std::size_t i = 0; i < pricing.energy_j.size(); ++i) {
    EXPECT_NEAR(pricing.energy_j[i], plan.frontier.points[i].energy_j,
                1e-12 * plan.frontier.points[i].energy_j);
  }
  EXPECT_NEAR(pricing.baseline_energy_j, plan.baseline.energy_j, 1e-12 * plan.baseline.energy_j);
  EXPECT_EQ(pricing.chosen, plan.chosen);
  EXPECT_EQ(pricing.lowered_waits, 0);
  EXPECT_EQ(pricing.lowered_wait_s, 0);
  EXPECT_GT(pricing.wait_s, 0);
}

TEST(PriceWaits, CalibratedNeverCostsMoreAndAnnotatesWhatItCounts) {
  const model::Profile profile = Unbalanced(4);
  const PipelinePlan plan = Solved(profile);
  model::WaitModel waits;
  waits.points = {{1410, 90}, {800, 65}};
  waits.switch_latency_s = 0.002;
  waits.margin_s = 0.001;
  const WaitPricing pricing = PriceWaits(profile, plan, waits);
  for (std::size_t i = 0; i < pricing.energy_j.size(); ++i) {
    EXPECT_LE(pricing.energy_j[i], plan.frontier.points[i].energy_j * (1 + 1e-12));
  }
  EXPECT_LT(pricing.baseline_energy_j, plan.baseline.energy_j);
  EXPECT_LE(plan.frontier.points[pricing.chosen].time_s, plan.deadline_s);
  EXPECT_LE(pricing.energy_j[pricing.chosen], pricing.energy_j[plan.chosen]);
  EXPECT_GT(pricing.lowered_waits, 0);
  int annotated = 0;
  for (const auto& stage : pricing.chosen_plan.stages) {
    for (const model::PlannedInstruction& in : stage) {
      if (in.wait_mhz == 0) continue;
      ++annotated;
      EXPECT_EQ(in.wait_mhz, 800);
      EXPECT_GE(in.wait_restore_s, waits.switch_latency_s);
    }
  }
  // The fill before each later stage's first instruction is lowered too.
  ASSERT_EQ(pricing.chosen_plan.head_waits.size(), pricing.chosen_plan.stages.size());
  EXPECT_EQ(pricing.chosen_plan.head_waits[0].mhz, 0);
  for (std::size_t s = 1; s < pricing.chosen_plan.head_waits.size(); ++s) {
    const model::HeadWait& head = pricing.chosen_plan.head_waits[s];
    SCOPED_TRACE("stage " + std::to_string(s));
    EXPECT_EQ(head.mhz, 800);
    EXPECT_GE(head.restore_s, waits.switch_latency_s);
    ++annotated;
  }
  EXPECT_EQ(annotated, pricing.lowered_waits);
  const model::Plan again = PlanWithWaits(profile, plan, pricing.waits, pricing.chosen);
  EXPECT_EQ(model::PlanToJson(again), model::PlanToJson(pricing.chosen_plan));
}

// The plan task prices the waits itself when its request names a model: the
// same prices and choice as PriceWaits on the plan solved without one, and a
// note when the model was calibrated on another GPU than the profile's.
TEST(PriceWaits, IsAnOptionOfThePlanTask) {
  model::Profile profile = Unbalanced(4);
  profile.metadata.gpu = "A100-SXM4-80GB";
  const PipelinePlan flat = Solved(profile);
  model::WaitModel waits;
  waits.points = {{1410, 90}, {800, 65}};
  waits.switch_latency_s = 0.002;
  waits.margin_s = 0.001;
  waits.gpu = "H100-SXM5-80GB";
  waits.source = "h100-waits.json";
  const WaitPricing expected = PriceWaits(profile, flat, waits);

  PlanRequest request = flat.request;
  request.waits = waits;
  const PipelinePlan priced = PlanPipeline(profile, request);
  ASSERT_TRUE(priced.waits.has_value());
  EXPECT_FALSE(flat.waits.has_value());
  EXPECT_EQ(priced.chosen, expected.chosen);
  EXPECT_EQ(priced.waits->chosen, expected.chosen);
  EXPECT_EQ(priced.waits->energy_j, expected.energy_j);
  EXPECT_EQ(priced.waits->lowered_waits, expected.lowered_waits);
  EXPECT_EQ(model::PlanToJson(priced.waits->chosen_plan), model::PlanToJson(expected.chosen_plan));
  bool noted = false;
  for (const std::string& note : priced.notes) {
    noted |= note.find(
                 "h100-waits.json was calibrated on H100-SXM5-80GB but the profile is of "
                 "A100-SXM4-80GB") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace joulepipe::solver

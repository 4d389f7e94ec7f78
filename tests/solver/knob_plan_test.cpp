// Knob tuples in planning (issue 15, item 5): each (clock, knobs) row of a
// profile is one option. A knob column with one value per row changes
// nothing; a faster-and-cheaper knob setting is chosen and named in the
// plan, and the plan replays to its prediction; composed per-partition
// options plan at least as well as clocks alone.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/knob_options.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::solver {
namespace {

using model::testing::Point;

constexpr int kClocks[] = {1410, 1200, 1000, 800};

// SmallProfile of plan_pipeline_test, each row with `knobs`; with `faster`,
// also an "overlap=2" row per clock at `time_factor` x time and
// `energy_factor` x energy.
model::Profile KnobProfile(int stages, const std::string& knobs, bool faster = false,
                           double time_factor = 0.9, double energy_factor = 0.95) {
  model::Profile profile;
  const double slower[] = {1.0, 1.12, 1.3, 1.62};
  const double cheaper[] = {1.0, 0.86, 0.78, 0.80};
  for (int s = 0; s < stages; ++s) {
    const double forward = 0.010 * (1 + 0.15 * s);
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const double t = kind == model::Kind::kForward ? forward : 2 * forward;
      for (int c = 0; c < 4; ++c) {
        model::ClockPoint point = Point(kClocks[c], t * slower[c], 3 * t * cheaper[c]);
        point.knobs = knobs;
        // Only the last stage (the critical one) gets the better setting.
        if (faster && s == stages - 1) {
          model::ClockPoint better = point;
          better.knobs = "overlap=2";
          better.time_s *= time_factor;
          better.energy_j *= energy_factor;
          profile.Add(s, kind, better);
        }
        profile.Add(s, kind, point);
      }
    }
  }
  return profile;
}

PlanRequest Request() {
  PlanRequest request;
  request.spec.kind = schedule::Kind::k1F1B;
  request.spec.stages = 4;
  request.spec.microbatches = 8;
  request.p_block_w = 60;
  request.resolution_s = 1e-4;
  return request;
}

TEST(KnobPlanTest, OneSettingPerRowEqualsTheClockOnlyResultsExactly) {
  const PipelinePlan plain = PlanPipeline(KnobProfile(4, ""), Request());
  const PipelinePlan knobbed = PlanPipeline(KnobProfile(4, "overlap=1"), Request());
  EXPECT_EQ(plain.baseline.time_s, knobbed.baseline.time_s);
  EXPECT_EQ(plain.baseline.energy_j, knobbed.baseline.energy_j);
  ASSERT_EQ(plain.frontier.points.size(), knobbed.frontier.points.size());
  for (std::size_t i = 0; i < plain.frontier.points.size(); ++i) {
    EXPECT_EQ(plain.frontier.points[i].time_s, knobbed.frontier.points[i].time_s) << i;
    EXPECT_EQ(plain.frontier.points[i].energy_j, knobbed.frontier.points[i].energy_j) << i;
    EXPECT_EQ(plain.frontier.points[i].mhz, knobbed.frontier.points[i].mhz) << i;
  }
  EXPECT_EQ(plain.chosen, knobbed.chosen);
  // The plain plan names no knobs; the knobbed one names its single setting
  // wherever the solver chose (the max-clock point uses the default).
  const model::Plan plain_plan = ToPlan(plain.schedule, plain.chosen_point());
  const model::Plan knob_plan = ToPlan(knobbed.schedule, knobbed.chosen_point());
  int named = 0;
  for (std::size_t s = 0; s < knob_plan.stages.size(); ++s) {
    for (std::size_t i = 0; i < knob_plan.stages[s].size(); ++i) {
      EXPECT_EQ(plain_plan.stages[s][i].knobs, "");
      const std::string& knobs = knob_plan.stages[s][i].knobs;
      EXPECT_TRUE(knobs.empty() || knobs == "overlap=1") << knobs;
      named += knobs.empty() ? 0 : 1;
    }
  }
  if (knobbed.chosen_point().knob.size() > 0) {
    EXPECT_GT(named, 0);
  }
}

TEST(KnobPlanTest, ChoosesTheBetterSettingAndThePlanReplaysToItsPrediction) {
  const model::Profile profile = KnobProfile(4, "", /*faster=*/true);
  const PipelinePlan plan = PlanPipeline(profile, Request());
  const PipelinePlan clocks_only = PlanPipeline(KnobProfile(4, ""), Request());
  // The baseline is today's settings (rows without knobs at the highest
  // clock); the better setting on the critical stage leaves time for lower
  // clocks and is cheaper itself: less energy at the same time.
  EXPECT_EQ(plan.baseline.time_s, clocks_only.baseline.time_s);
  EXPECT_EQ(plan.baseline.energy_j, clocks_only.baseline.energy_j);
  EXPECT_LT(plan.chosen_point().energy_j, clocks_only.chosen_point().energy_j);
  const model::Plan file = ToPlan(plan.schedule, plan.chosen_point());
  int with_overlap = 0;
  for (const auto& stage : file.stages) {
    for (const model::PlannedInstruction& planned : stage) {
      with_overlap += planned.knobs == "overlap=2" ? 1 : 0;
    }
  }
  EXPECT_GT(with_overlap, 0);
  // Replay looks each point up by (clock, knobs): the same figures as planned.
  const model::Plan back = model::PlanFromJson(model::PlanToJson(file), "plan.json");
  const schedule::ReplayResult replay =
      schedule::Replay(plan.schedule, profile, back, plan.p_block_w);
  EXPECT_NEAR(replay.time_s, plan.chosen_point().time_s, 1e-12);
  EXPECT_NEAR(replay.energy_j, plan.chosen_point().energy_j, 1e-9);
  const Evaluation evaluated = EvaluateClocks(plan.schedule, profile, plan.p_block_w,
                                              plan.chosen_point().mhz, plan.chosen_point().knob);
  EXPECT_NEAR(evaluated.time_s, plan.chosen_point().time_s, 1e-12);
  EXPECT_NEAR(evaluated.energy_j, plan.chosen_point().energy_j, 1e-9);
}

TEST(KnobPlanTest, ReplayRejectsKnobsTheProfileLacks) {
  const model::Profile profile = KnobProfile(4, "");
  const PipelinePlan plan = PlanPipeline(profile, Request());
  model::Plan file = ToPlan(plan.schedule, plan.chosen_point());
  file.stages[1][0].knobs = "overlap=7";
  try {
    schedule::Replay(plan.schedule, profile, file, plan.p_block_w);
    ADD_FAILURE() << "no error";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("overlap=7"), std::string::npos) << e.what();
  }
}

// Two partitions per instruction, each with a default and an "overlapped"
// setting that is faster at some energy; composed into one profile.
TEST(KnobPlanTest, ComposedPartitionOptionsPlanAtLeastAsWellAsClocksAlone) {
  auto partitions = [](double t, bool with_overlap) {
    std::vector<std::vector<model::PartitionOption>> parts(2);
    const double slower[] = {1.0, 1.12, 1.3, 1.62};
    const double cheaper[] = {1.0, 0.86, 0.78, 0.80};
    for (int p = 0; p < 2; ++p) {
      const double share = p == 0 ? 0.6 : 0.4;
      for (int c = 0; c < 4; ++c) {
        const double time = share * t * slower[c];
        const double energy = 3 * share * t * cheaper[c];
        parts[p].push_back({kClocks[c], "0", time, energy});
        if (with_overlap) parts[p].push_back({kClocks[c], "1", 0.85 * time, 1.02 * energy});
      }
    }
    return parts;
  };
  auto profile_of = [&](bool with_overlap) {
    model::Profile profile;
    for (int s = 0; s < 4; ++s) {
      const double forward = 0.010 * (1 + 0.15 * s);
      for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
        const double t = kind == model::Kind::kForward ? forward : 2 * forward;
        for (const model::ComposedOption& o :
             model::ComposePartitions(partitions(t, with_overlap))) {
          model::ClockPoint point = Point(o.mhz, o.time_s, o.energy_j);
          point.knobs = "part0=" + o.knobs[0] + ";part1=" + o.knobs[1];
          profile.Add(s, kind, point);
        }
      }
    }
    return profile;
  };
  const model::Profile composed = profile_of(true);
  const model::Profile clocks = profile_of(false);
  EXPECT_GT(composed.Points(3, model::Kind::kForward).size(),
            clocks.Points(3, model::Kind::kForward).size());
  const PipelinePlan with_knobs = PlanPipeline(composed, Request());
  const PipelinePlan without = PlanPipeline(clocks, Request());
  // At the clocks-only plan's time the knob frontier is never worse...
  const FrontierPoint* at_same_time = with_knobs.frontier.BestWithin(without.baseline.time_s);
  ASSERT_NE(at_same_time, nullptr);
  EXPECT_LE(at_same_time->energy_j, without.chosen_point().energy_j + 1e-9);
  // ...and here strictly better (faster partitions leave time for lower clocks).
  EXPECT_LT(at_same_time->energy_j, without.chosen_point().energy_j);
}

}  // namespace
}  // namespace joulepipe::solver

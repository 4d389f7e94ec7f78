// The "evaluate a plan" task call (evaluate_plan.hpp): it replays the
// schedule the plan declares, takes P_block from the request or the
// profile's metadata, and its errors name the plan file and its JSON fields
// (num_stages, num_microbatches, ...), never Spec::* fields or flags.
#include "joulepipe/schedule/evaluate_plan.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "schedule_test_support.hpp"

namespace joulepipe::schedule {
namespace {

using model::Kind::kBackward;
using model::Kind::kForward;
using model::testing::Point;
using testing::MakeSpec;

constexpr int kFast = 1410;

model::Plan UniformPlan(const Schedule& schedule, int mhz) {
  model::Plan plan;
  plan.schedule = std::string(KindName(schedule.spec.kind));
  plan.num_stages = schedule.spec.stages;
  plan.num_microbatches = schedule.spec.microbatches;
  plan.num_chunks = schedule.spec.chunks;
  for (const std::vector<int>& order : schedule.stage_order) {
    plan.stages.emplace_back();
    for (int id : order) plan.stages.back().push_back({schedule.nodes[id], mhz, 0, 0, {}});
  }
  return plan;
}

// `stages` stages, forward 1 s / 100 J and backward 2 s / 200 J at kFast.
model::Profile FlatProfile(int stages) {
  model::Profile profile;
  for (int s = 0; s < stages; ++s) {
    profile.Add(s, kForward, Point(kFast, 1, 100));
    profile.Add(s, kBackward, Point(kFast, 2, 200));
  }
  return profile;
}

EvaluateRequest Named(std::optional<double> p_block_w) {
  EvaluateRequest request;
  request.p_block_w = p_block_w;
  request.profile_name = "prof.csv";
  request.plan_name = "plan.json";
  return request;
}

// The message of the InputError `action` throws; fails the test if none.
template <typename Action>
std::string MessageOf(Action&& action) {
  const std::string message = testing::InputErrorOf(action);
  EXPECT_FALSE(message.empty()) << "expected model::InputError";
  return message;
}

void ExpectPlanFileTerms(const std::string& message, const std::string& field) {
  EXPECT_NE(message.find("plan.json"), std::string::npos) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_EQ(message.find("Spec::"), std::string::npos) << message;
  EXPECT_EQ(message.find("--"), std::string::npos) << message;
}

TEST(EvaluatePlan, ReplaysTheDeclaredSchedule) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 3));
  const model::Profile profile = FlatProfile(2);
  const model::Plan plan = UniformPlan(schedule, kFast);
  const PlanEvaluation e = EvaluatePlan(profile, plan, Named(50));
  const ReplayResult direct = Replay(schedule, profile, plan, 50, "plan.json");
  EXPECT_EQ(e.spec.stages, 2);
  EXPECT_EQ(e.spec.microbatches, 3);
  EXPECT_EQ(e.replay.time_s, direct.time_s);
  EXPECT_EQ(e.replay.energy_j, direct.energy_j);
  EXPECT_EQ(e.p_block_w, 50);
  EXPECT_EQ(e.p_block_source, "request");
  EXPECT_TRUE(e.notes.empty());
}

TEST(EvaluatePlan, PBlockFollowsThePlanRule) {
  const Schedule schedule = Build(MakeSpec(Kind::kGPipe, 2, 2));
  model::Profile profile = FlatProfile(2);
  const model::Plan plan = UniformPlan(schedule, kFast);

  const std::string missing = MessageOf([&] { EvaluatePlan(profile, plan, Named({})); });
  EXPECT_NE(missing.find("EvaluateRequest::p_block_w"), std::string::npos) << missing;
  EXPECT_NE(missing.find("prof.csv"), std::string::npos) << missing;

  profile.metadata.p_block_w = 40;
  const PlanEvaluation from_profile = EvaluatePlan(profile, plan, Named({}));
  EXPECT_EQ(from_profile.p_block_w, 40);
  EXPECT_EQ(from_profile.p_block_source, "profile");
  EXPECT_EQ(from_profile.replay.energy_j, Replay(schedule, profile, plan, 40).energy_j);

  const PlanEvaluation overridden = EvaluatePlan(profile, plan, Named(50));
  EXPECT_EQ(overridden.p_block_w, 50);
  ASSERT_EQ(overridden.notes.size(), 1u);
  EXPECT_NE(overridden.notes[0].find("EvaluateRequest::p_block_w"), std::string::npos);

  EXPECT_FALSE(MessageOf([&] { EvaluatePlan(profile, plan, Named(-1)); }).empty());
}

TEST(EvaluatePlan, ImpossibleScheduleNamesThePlanFileFields) {
  // Interleaved needs microbatches that are a multiple of the stages.
  model::Plan plan;
  plan.schedule = "interleaved";
  plan.num_stages = 2;
  plan.num_microbatches = 3;
  plan.num_chunks = 2;
  plan.stages.resize(2);
  for (int m = 0; m < 3; ++m) {
    for (int s = 0; s < 2; ++s) {
      plan.stages[s].push_back({{s, m % 2, m, kForward}, kFast, 0, 0, {}});
    }
  }
  const std::string message = MessageOf([&] { EvaluatePlan(FlatProfile(4), plan, Named(50)); });
  ExpectPlanFileTerms(message, "num_microbatches");

  plan.num_chunks = 1;
  for (auto& stage : plan.stages) {
    for (auto& in : stage) in.instruction.chunk = 0;
  }
  plan.num_microbatches = 4;
  plan.stages[0].push_back({{0, 0, 3, kForward}, kFast, 0, 0, {}});
  ExpectPlanFileTerms(MessageOf([&] { EvaluatePlan(FlatProfile(2), plan, Named(50)); }),
                      "num_chunks");
}

TEST(EvaluatePlan, ProfileOfAnotherPipelineNamesBothFiles) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  const std::string message =
      MessageOf([&] { EvaluatePlan(FlatProfile(3), UniformPlan(schedule, kFast), Named(50)); });
  ExpectPlanFileTerms(message, "num_stages 2");
  EXPECT_NE(message.find("prof.csv"), std::string::npos) << message;
}

TEST(EvaluatePlan, HeaderThatDisagreesWithTheListsNamesTheField) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.num_stages = 3;
  ExpectPlanFileTerms(MessageOf([&] { EvaluatePlan(FlatProfile(2), plan, Named(50)); }),
                      "num_stages is 3");
  plan = UniformPlan(schedule, kFast);
  plan.num_microbatches = 5;
  ExpectPlanFileTerms(MessageOf([&] { EvaluatePlan(FlatProfile(2), plan, Named(50)); }),
                      "num_microbatches is 5");
}

}  // namespace
}  // namespace joulepipe::schedule

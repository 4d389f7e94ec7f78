// CoordinatedPlan's other plan sources: in process (embedded coordination:
// plans offered as protocol JSON, applied at a step boundary in the loop's
// order, refused when they are not the loop's) and a plan file.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "joulepipe/protocol/json.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "joulepipe/runtime/coordinated_plan.hpp"
#include "runtime_test_support.hpp"

namespace joulepipe::runtime {
namespace {

using model::Kind;
using testing::FakeControl;
using testing::RunStep;

model::PlannedInstruction P(Kind kind, int microbatch, int mhz) {
  model::PlannedInstruction p;
  p.instruction.kind = kind;
  p.instruction.microbatch = microbatch;
  p.instruction.stage = 2;
  p.mhz = mhz;
  return p;
}

// `microbatches` forwards at `forward_mhz`, then as many backwards (GPipe's
// order), for rank 3 (pipeline 1, stage 2).
std::string PlanText(int version, int microbatches, int forward_mhz, int backward_mhz,
                     const std::string& reason, int rank = 3) {
  protocol::RankPlan plan;
  plan.rank = rank;
  plan.pipeline = 1;
  plan.stage = 2;
  plan.version = version;
  plan.reason = reason;
  plan.predicted = model::Prediction{0.5, 400.0 + version};
  for (int m = 0; m < microbatches; ++m)
    plan.instructions.push_back(P(Kind::kForward, m, forward_mhz));
  for (int m = 0; m < microbatches; ++m) {
    plan.instructions.push_back(P(Kind::kBackward, m, backward_mhz));
  }
  plan.frequencies = protocol::ZeusFrequencies(plan.instructions);
  return protocol::RankPlanToJson(plan, "job").dump();
}

// The loop runs 1F1B: F0 B0 F1 B1 ...
std::vector<model::PlannedInstruction> OneFOneB(int microbatches) {
  std::vector<model::PlannedInstruction> loop;
  for (int m = 0; m < microbatches; ++m) {
    loop.push_back(P(Kind::kForward, m, 0));
    loop.push_back(P(Kind::kBackward, m, 0));
  }
  return loop;
}

CoordinatedPlanOptions InProcessOptions() {
  CoordinatedPlanOptions options;
  options.source = PlanSource::kInProcess;
  options.rank = 3;
  options.through = "nvml";
  return options;
}

struct InProcess {
  explicit InProcess(CoordinatedPlanOptions options = InProcessOptions()) {
    AgentOptions agent_options;
    agent_options.nvml_index = 0;
    agent_options.control = control;
    agent_options.log = [](const std::string&) {};  // its own lines are agent_test's
    agent = std::make_unique<Agent>(std::move(agent_options));
    options.log = [this](const std::string& line) { log.push_back(line); };
    coordinated = std::make_unique<CoordinatedPlan>(*agent, std::move(options));
  }
  std::shared_ptr<FakeControl> control = std::make_shared<FakeControl>();
  std::unique_ptr<Agent> agent;
  std::unique_ptr<CoordinatedPlan> coordinated;
  std::vector<std::string> log;
};

TEST(CoordinatedPlanInProcessTest, AnOfferedPlanRunsFromTheNextStepInTheLoopsOrder) {
  InProcess t;
  EXPECT_FALSE(t.coordinated->Start());  // nothing offered yet: default clocks, no line
  EXPECT_TRUE(t.log.empty());
  RunStep(*t.coordinated, OneFOneB(2));  // the loop's order is learnt
  ASSERT_EQ(t.coordinated->loop_order().size(), 4u);
  EXPECT_EQ(t.coordinated->loop_order()[1], (LoopStep{Kind::kBackward, 0, 0}));

  ASSERT_TRUE(t.coordinated->Offer(PlanText(1, 2, 1000, 1200, "initial plan")));
  EXPECT_EQ(t.agent->mode(), Mode::kOff);  // not inside a step: at the next boundary
  RunStep(*t.coordinated, OneFOneB(2));
  EXPECT_EQ(t.agent->mode(), Mode::kExecute);
  ASSERT_EQ(t.log.size(), 1u);
  EXPECT_EQ(t.log[0],
            "plan v1 applied to stage 2 through nvml: F0@1000 B0@1200 F1@1000 B1@1200 MHz "
            "(joulepipe reordered it to the order the loop ran); initial plan");
  RunStep(*t.coordinated, OneFOneB(2));
  ASSERT_TRUE(t.agent->WaitIdle());
  EXPECT_FALSE(t.agent->fallback_reason()) << *t.agent->fallback_reason();
  const CoordinationStats s = t.coordinated->stats();
  EXPECT_EQ(s.running_version, 1);
  EXPECT_DOUBLE_EQ(s.running_predicted_energy_j, 401.0);
  EXPECT_EQ(s.plans_applied, 1u);
  EXPECT_EQ(s.reports_queued, 0u);  // in process: nothing is reported anywhere
}

TEST(CoordinatedPlanInProcessTest, OnlyANewerVersionForThisRankIsTaken) {
  InProcess t;
  RunStep(*t.coordinated, OneFOneB(2));
  ASSERT_TRUE(t.coordinated->Offer(PlanText(2, 2, 1000, 1200, "straggler")));
  EXPECT_FALSE(t.coordinated->Offer(PlanText(2, 2, 800, 800, "again")));  // same version
  EXPECT_FALSE(t.coordinated->Offer(PlanText(1, 2, 800, 800, "older")));
  EXPECT_TRUE(t.log.empty());  // silently: every rank may be offered every plan
  EXPECT_FALSE(t.coordinated->Offer(PlanText(3, 2, 800, 800, "for rank 1", 1)));
  EXPECT_FALSE(t.coordinated->Offer("{not json"));
  ASSERT_EQ(t.log.size(), 2u);
  EXPECT_NE(t.log[0].find("a plan offered to rank 3 was not taken: rank is 1"), std::string::npos)
      << t.log[0];
  EXPECT_NE(t.log[1].find("this rank keeps default clocks"), std::string::npos) << t.log[1];
  RunStep(*t.coordinated, OneFOneB(2));
  EXPECT_EQ(t.coordinated->stats().running_version, 2);
  EXPECT_NE(t.log.back().find("; straggler"), std::string::npos) << t.log.back();
}

TEST(CoordinatedPlanInProcessTest, APlanOfAnotherShapeIsRefusedAndALaterOneThatFitsRuns) {
  InProcess t;
  RunStep(*t.coordinated, OneFOneB(2));
  ASSERT_TRUE(t.coordinated->Offer(PlanText(1, 3, 1000, 1200, "initial plan")));
  RunStep(*t.coordinated, OneFOneB(2));
  ASSERT_EQ(t.log.size(), 1u);
  EXPECT_EQ(t.log[0],
            "plan v1 for stage 2 not applied: the schedule this rank ran (4 forwards/backwards) "
            "is not the one planned (6): is the pipeline shape the same on every iteration?; this "
            "rank runs at default clocks, training goes on");
  CoordinationStats s = t.coordinated->stats();
  EXPECT_EQ(s.running_version, 0);
  EXPECT_EQ(s.plans_refused, 1u);
  EXPECT_NE(s.refusal.find("is not the one planned (6)"), std::string::npos);
  EXPECT_EQ(t.agent->mode(), Mode::kOff);

  ASSERT_TRUE(t.coordinated->Offer(PlanText(2, 2, 1000, 1200, "recovered")));
  RunStep(*t.coordinated, OneFOneB(2));
  EXPECT_EQ(t.agent->mode(), Mode::kExecute);
  EXPECT_EQ(t.coordinated->stats().running_version, 2);
}

TEST(CoordinatedPlanInProcessTest, APlanGivenBeforeTheFirstStepIsReorderedAfterIt) {
  InProcess t;
  ASSERT_TRUE(t.coordinated->Offer(PlanText(1, 2, 1000, 1200, "initial plan")));
  EXPECT_TRUE(t.coordinated->Start());  // applied as planned: the loop's order is unknown
  EXPECT_EQ(t.log.size(), 1u);
  EXPECT_EQ(t.log[0].find("plan v1 applied to stage 2 through nvml: F0@1000 F1@1000 B0@1200"), 0u)
      << t.log[0];
  RunStep(*t.coordinated, OneFOneB(2));  // the agent finds the order differs...
  ASSERT_EQ(t.log.size(), 2u);           // ...and the plan is put into the loop's
  EXPECT_NE(t.log[1].find("F0@1000 B0@1200 F1@1000 B1@1200 MHz (joulepipe reordered it"),
            std::string::npos)
      << t.log[1];
  RunStep(*t.coordinated, OneFOneB(2));
  EXPECT_EQ(t.agent->mode(), Mode::kExecute);
  EXPECT_FALSE(t.agent->fallback_reason());
  EXPECT_EQ(t.coordinated->stats().running_version, 1);
}

// A two-stage plan file: GPipe's order, stage 0 at 1000/1200 MHz, stage 1 at
// 800 MHz with a lowered head wait.
std::shared_ptr<const model::Plan> TwoStagePlan() {
  auto plan = std::make_shared<model::Plan>();
  plan->schedule = "gpipe";
  plan->num_stages = 2;
  plan->num_microbatches = 2;
  plan->stages = {{P(Kind::kForward, 0, 1000), P(Kind::kForward, 1, 1000),
                   P(Kind::kBackward, 0, 1200), P(Kind::kBackward, 1, 1200)},
                  {P(Kind::kForward, 0, 800), P(Kind::kForward, 1, 800), P(Kind::kBackward, 0, 800),
                   P(Kind::kBackward, 1, 800)}};
  plan->head_waits = {{}, {600, 0.002}};
  return plan;
}

CoordinatedPlanOptions PlanFileOptions(std::shared_ptr<const model::Plan> plan, int stage,
                                       int stages) {
  CoordinatedPlanOptions options;
  options.source = PlanSource::kPlan;
  options.plan = std::move(plan);
  options.plan_name = "out/chosen.json";
  options.rank = stage;
  options.stage = stage;
  options.stages = stages;
  options.through = "daemon";
  return options;
}

TEST(CoordinatedPlanFileTest, TheRanksStageRunsFromStartWithItsHeadWait) {
  InProcess t(PlanFileOptions(TwoStagePlan(), 1, 2));
  EXPECT_TRUE(t.coordinated->Start());
  EXPECT_EQ(t.agent->mode(), Mode::kExecute);
  ASSERT_EQ(t.log.size(), 1u);
  EXPECT_EQ(t.log[0],
            "plan out/chosen.json applied to stage 1 through daemon: head-wait@600 F0@800 F1@800 "
            "B0@800 B1@800 MHz");
  RunStep(*t.coordinated, TwoStagePlan()->stages[1]);
  EXPECT_FALSE(t.agent->fallback_reason());
  EXPECT_EQ(t.coordinated->stats().running_version, 1);
  EXPECT_EQ(t.log.size(), 1u);  // the loop ran the plan's order: nothing more to say
}

TEST(CoordinatedPlanFileTest, APlanForAnotherStageCountIsRefusedAtStart) {
  InProcess t(PlanFileOptions(TwoStagePlan(), 0, 4));
  EXPECT_FALSE(t.coordinated->Start());
  EXPECT_EQ(t.agent->mode(), Mode::kOff);
  ASSERT_EQ(t.log.size(), 1u);
  EXPECT_EQ(t.log[0],
            "the plan out/chosen.json is for 2 pipeline stages, this job has 4; plan the job's "
            "own profile; this rank runs at default clocks, training goes on");
  EXPECT_EQ(t.coordinated->stats().plans_refused, 1u);
}

TEST(CoordinatedPlanFileTest, APowerLimitPlanSetsTheLimitAndNoClock) {
  auto plan = std::make_shared<model::Plan>(*TwoStagePlan());
  plan->power_limits_w = {250, 0};
  plan->head_waits.clear();
  InProcess t(PlanFileOptions(plan, 0, 2));
  EXPECT_TRUE(t.coordinated->Start());
  ASSERT_EQ(t.log.size(), 1u);
  EXPECT_EQ(t.log[0],
            "power-limit plan out/chosen.json applied to stage 0 through daemon: 250 W, default "
            "clocks");
  RunStep(*t.coordinated, plan->stages[0]);
  ASSERT_TRUE(t.agent->WaitIdle());
  EXPECT_EQ(t.control->Count("power 0 250"), 1);
  for (const std::string& call : t.control->calls()) EXPECT_NE(call.rfind("lock", 0), 0u) << call;
}

// A grid plan's levers go with it when the first step puts it into the
// loop's order: the offset between pipelines still holds (a reorder once
// re-applied the stage's clocks without the grid's shape and offset).
TEST(CoordinatedPlanFileTest, AGridPlanReorderedAfterTheFirstStepKeepsItsOffset) {
  auto plan = std::make_shared<model::Plan>(*TwoStagePlan());
  plan->head_waits.clear();
  plan->grid = model::GridShape{};
  plan->grid->hold_mhz = {0, 0};
  plan->grid->pipeline_offset_s = 0.04;
  CoordinatedPlanOptions options = PlanFileOptions(plan, 0, 2);
  options.pipeline = 1;
  InProcess t(std::move(options));
  EXPECT_TRUE(t.coordinated->Start());  // GPipe's order; the loop runs 1F1B
  ASSERT_EQ(t.log.size(), 2u);
  EXPECT_EQ(t.log[1].find("pipeline 1 starts each iteration 40 ms late"), 0u) << t.log[1];
  RunStep(*t.coordinated, OneFOneB(2));
  ASSERT_EQ(t.log.size(), 4u);
  EXPECT_NE(t.log[2].find("(joulepipe reordered it to the order the loop ran)"), std::string::npos)
      << t.log[2];
  EXPECT_EQ(t.log[3].find("pipeline 1 starts each iteration 40 ms late"), 0u) << t.log[3];
  const auto before = std::chrono::steady_clock::now();
  t.coordinated->OnStepBegin();  // the offset is waited inside the step
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(40));
  EXPECT_EQ(t.agent->mode(), Mode::kExecute);
}

}  // namespace
}  // namespace joulepipe::runtime

// InLoopOrder, SameOrder and ClocksText: a stage plan put into the order the
// training loop runs.
#include "joulepipe/runtime/loop_order.hpp"

#include <gtest/gtest.h>

namespace joulepipe::runtime {
namespace {

using model::Kind;

model::PlannedInstruction P(Kind kind, int microbatch, int mhz, int chunk = 0) {
  model::PlannedInstruction p;
  p.instruction.kind = kind;
  p.instruction.microbatch = microbatch;
  p.instruction.chunk = chunk;
  p.mhz = mhz;
  return p;
}

// GPipe's order for two microbatches, each instruction at its own clock.
std::vector<model::PlannedInstruction> GPipePlan() {
  return {P(Kind::kForward, 0, 1000), P(Kind::kForward, 1, 1100), P(Kind::kBackward, 0, 1200),
          P(Kind::kBackward, 1, 1300)};
}

// 1F1B's order for the same instructions.
std::vector<LoopStep> OneFOneBLoop() {
  return {{Kind::kForward, 0, 0},
          {Kind::kBackward, 0, 0},
          {Kind::kForward, 1, 0},
          {Kind::kBackward, 1, 0}};
}

TEST(LoopOrderTest, ReordersToTheLoopKeepingEachInstructionsClock) {
  std::vector<model::PlannedInstruction> out;
  std::string why;
  ASSERT_TRUE(InLoopOrder(GPipePlan(), OneFOneBLoop(), out, why)) << why;
  EXPECT_TRUE(SameOrder(out, OneFOneBLoop()));
  EXPECT_FALSE(SameOrder(GPipePlan(), OneFOneBLoop()));
  EXPECT_EQ(ClocksText(out), "F0@1000 B0@1200 F1@1100 B1@1300");
}

TEST(LoopOrderTest, AnotherSetOfInstructionsIsRefusedWithTheCounts) {
  std::vector<model::PlannedInstruction> out = {P(Kind::kForward, 9, 9)};
  std::string why;
  std::vector<LoopStep> shorter = OneFOneBLoop();
  shorter.pop_back();
  EXPECT_FALSE(InLoopOrder(GPipePlan(), shorter, out, why));
  EXPECT_EQ(why,
            "the schedule this rank ran (3 forwards/backwards) is not the one planned (4): is the "
            "pipeline shape the same on every iteration?");
  ASSERT_EQ(out.size(), 1u);  // unchanged

  // Same size, one instruction that the plan does not have.
  std::vector<LoopStep> other = OneFOneBLoop();
  other[3].chunk = 1;
  EXPECT_FALSE(InLoopOrder(GPipePlan(), other, out, why));
  // The loop running one instruction twice.
  std::vector<LoopStep> twice = OneFOneBLoop();
  twice[3] = twice[1];
  EXPECT_FALSE(InLoopOrder(GPipePlan(), twice, out, why));
  // A plan naming one instruction twice.
  std::vector<model::PlannedInstruction> doubled = GPipePlan();
  doubled[3] = doubled[2];
  EXPECT_FALSE(InLoopOrder(doubled, OneFOneBLoop(), out, why));
  EXPECT_EQ(out.size(), 1u);
}

TEST(LoopOrderTest, ClocksTextNamesChunksWhenNotZero) {
  EXPECT_EQ(ClocksText({P(Kind::kForward, 3, 1410, 1), P(Kind::kBackward, 0, 810)}),
            "F3.1@1410 B0@810");
  EXPECT_EQ(ClocksText({}), "");
  model::PlannedInstruction waits = P(Kind::kBackward, 2, 1200);
  waits.wait_mhz = 600;
  waits.wait_restore_s = 0.01;
  waits.knobs = "overlap=2";
  EXPECT_EQ(ClocksText({waits}), "B2@1200/wait@600[overlap=2]");
}

}  // namespace
}  // namespace joulepipe::runtime

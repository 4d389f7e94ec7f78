// Replay against hand-worked timelines, plan validation messages, and a
// longest-path cross-check over random shapes and clocks.

#include "joulepipe/schedule/replay.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "schedule_test_support.hpp"

namespace joulepipe::schedule {
namespace {

using model::Instruction;
using model::Kind::kBackward;
using model::Kind::kForward;
using model::testing::Point;
using testing::InputErrorOf;
using testing::MakeSpec;

constexpr int kFast = 1410;
constexpr int kSlow = 1000;

// A plan that runs `schedule` with every instruction at `mhz`.
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

// Stage 0: forward 1 s / 100 J, backward 2 s / 200 J.
// Stage 1: forward 2 s / 150 J, backward 3 s / 250 J; at kSlow forward 4 s / 120 J.
model::Profile TwoStageProfile() {
  model::Profile profile;
  profile.Add(0, kForward, Point(kFast, 1, 100));
  profile.Add(0, kBackward, Point(kFast, 2, 200));
  profile.Add(1, kForward, Point(kFast, 2, 150));
  profile.Add(1, kBackward, Point(kFast, 3, 250));
  profile.Add(1, kForward, Point(kSlow, 4, 120));
  return profile;
}

std::string ErrorOf(const Schedule& schedule, const model::Profile& profile,
                    const model::Plan& plan) {
  return InputErrorOf([&] { Replay(schedule, profile, plan, 50, "plan.json"); });
}

void ExpectContains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

// 1F1B, S=2, M=2. Stage 0 runs F0 F1 B0 B1, stage 1 runs F0 B0 F1 B1.
//   s0 F0 [0,1]   s0 F1 [1,2]
//   s1 F0 [1,3]   s1 B0 [3,6]   s1 F1 [6,8]   s1 B1 [8,11]
//   s0 B0 [6,8]   s0 B1 [11,13]
// T = 13. Busy: stage 0 6 s, stage 1 10 s; idle 7 + 3 = 10 s.
// Busy energy 2*(100+200) + 2*(150+250) = 1400 J; blocking 50 W * 10 s = 500 J.
TEST(Replay, HandWorkedOneFOneB) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  const ReplayResult result = Replay(schedule, TwoStageProfile(), UniformPlan(schedule, kFast), 50);
  EXPECT_DOUBLE_EQ(result.time_s, 13);
  EXPECT_DOUBLE_EQ(result.busy_energy_j, 1400);
  EXPECT_DOUBLE_EQ(result.blocking_energy_j, 500);
  EXPECT_DOUBLE_EQ(result.energy_j, 1900);
}

// The same 1F1B run with a calibrated wait model: 1410 MHz 100 W, 600 MHz
// 70 W (saving 30 W), switch 0.5 s, margin 0.5 s: waits of >= 1.5 s are
// lowered for g - 1 s. Waits after each instruction:
//   stage 0: F0 0, F1 4 (2 -> 6), B0 3 (8 -> 11), B1 0
//   stage 1: F0 0, B0 0, F1 0, B1 2 (11 -> T = 13); its 1 s head wait is too short
// Lowered 3 + 2 + 1 = 6 s; blocking 500 - 30 x 6 = 320 J.
model::WaitModel TestWaits(double p_block_w) {
  model::WaitModel waits = model::FlatWaitModel(p_block_w);
  waits.points = {{1410, 100}, {600, 70}, {1000, 85}};
  waits.switch_latency_s = 0.5;
  waits.margin_s = 0.5;
  return waits;
}

TEST(Replay, CalibratedWaitsLowerLongWaitsOnly) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  const model::Plan plan = UniformPlan(schedule, kFast);
  const ReplayResult result = Replay(schedule, TwoStageProfile(), plan, TestWaits(50));
  EXPECT_DOUBLE_EQ(result.time_s, 13);
  EXPECT_DOUBLE_EQ(result.lowered_wait_s, 6);
  EXPECT_DOUBLE_EQ(result.blocking_energy_j, 320);
  EXPECT_DOUBLE_EQ(result.energy_j, 1720);
  EXPECT_DOUBLE_EQ(result.timetable[0][1].wait_after_s, 4);
  EXPECT_DOUBLE_EQ(result.timetable[1][3].wait_after_s, 2);
  // Lowered power never goes below 0: P_block 20 W, saving 30 W.
  EXPECT_DOUBLE_EQ(Replay(schedule, TwoStageProfile(), plan, TestWaits(20)).blocking_energy_j,
                   20 * 10 - 20 * 6);

  model::Plan annotated = plan;
  EXPECT_EQ(AnnotateWaits(result, TestWaits(50), &annotated), 3);
  EXPECT_EQ(annotated.stages[0][1].wait_mhz, 600);
  EXPECT_DOUBLE_EQ(annotated.stages[0][1].wait_restore_s, 3);  // 4 - 0.5 - 0.5
  EXPECT_DOUBLE_EQ(annotated.stages[0][2].wait_restore_s, 2);
  EXPECT_DOUBLE_EQ(annotated.stages[1][3].wait_restore_s, 1);
  EXPECT_EQ(annotated.stages[0][0].wait_mhz, 0);
  EXPECT_EQ(annotated.stages[1][0].wait_mhz, 0);
}

// The wait before a stage's first instruction (the fill) is lowered too.
// Switch 0.25 s, margin 0.25 s: waits of >= 0.75 s are lowered for g - 0.5 s:
// after instructions 4, 3 and 2 s -> 3.5 + 2.5 + 1.5; stage 1's 1 s head
// wait -> 0.5 (restore 0.5 s after the step begins). Lowered 8 s; blocking
// 500 - 30 x 8 = 260 J.
TEST(Replay, CalibratedWaitsLowerTheHeadWait) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  const model::Plan plan = UniformPlan(schedule, kFast);
  model::WaitModel waits = TestWaits(50);
  waits.switch_latency_s = 0.25;
  waits.margin_s = 0.25;
  const ReplayResult result = Replay(schedule, TwoStageProfile(), plan, waits);
  ASSERT_EQ(result.head_wait_s.size(), 2u);
  EXPECT_DOUBLE_EQ(result.head_wait_s[0], 0);
  EXPECT_DOUBLE_EQ(result.head_wait_s[1], 1);
  EXPECT_DOUBLE_EQ(result.lowered_wait_s, 8);
  EXPECT_DOUBLE_EQ(result.blocking_energy_j, 260);

  model::Plan annotated = plan;
  EXPECT_EQ(AnnotateWaits(result, waits, &annotated), 4);
  ASSERT_EQ(annotated.head_waits.size(), 2u);
  EXPECT_EQ(annotated.head_waits[0].mhz, 0);
  EXPECT_EQ(annotated.head_waits[1].mhz, 600);
  EXPECT_DOUBLE_EQ(annotated.head_waits[1].restore_s, 0.5);
  // The plan replays to the same figures, and without a lowered head wait
  // (the first test's model) the plan names none.
  model::Plan plain = plan;
  AnnotateWaits(Replay(schedule, TwoStageProfile(), plan, TestWaits(50)), TestWaits(50), &plain);
  EXPECT_TRUE(plain.head_waits.empty());
}

// An uncalibrated model is today's accounting, bit for bit, on random shapes.
TEST(Replay, FlatWaitModelEqualsPBlockExactly) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 40; ++trial) {
    const Kind kind = trial % 3 == 0   ? Kind::kGPipe
                      : trial % 3 == 1 ? Kind::k1F1B
                                       : Kind::kInterleaved;
    const int stages = 1 + static_cast<int>(rng() % 5);
    const int chunks = kind == Kind::kInterleaved ? 2 : 1;
    const int microbatches = kind == Kind::kInterleaved ? stages * (1 + static_cast<int>(rng() % 3))
                                                        : 1 + static_cast<int>(rng() % 9);
    const Schedule schedule = Build(MakeSpec(kind, stages, microbatches, chunks));
    model::Profile profile;
    std::uniform_real_distribution<double> time(0.1, 3);
    for (int s = 0; s < stages; ++s) {
      profile.Add(s, kForward, Point(kFast, time(rng), 100 * time(rng)));
      profile.Add(s, kBackward, Point(kFast, time(rng), 100 * time(rng)));
    }
    const model::Plan plan = UniformPlan(schedule, kFast);
    const double p_block = 37.25;
    const ReplayResult a = Replay(schedule, profile, plan, p_block);
    const ReplayResult b = Replay(schedule, profile, plan, model::FlatWaitModel(p_block));
    EXPECT_EQ(a.energy_j, b.energy_j);
    EXPECT_EQ(a.blocking_energy_j, b.blocking_energy_j);
    EXPECT_EQ(b.lowered_wait_s, 0);
    // A calibrated model never costs more than the flat one.
    EXPECT_LE(Replay(schedule, profile, plan, TestWaits(p_block)).energy_j, a.energy_j);
  }
}

// Same, with stage 1's F1 at kSlow (4 s, 120 J):
//   s1 F1 [6,10]  s1 B1 [10,13]  s0 B1 [13,15]
// T = 15. Busy: stage 0 6 s, stage 1 12 s; idle 9 + 3 = 12 s.
// Busy energy 1400 - 150 + 120 = 1370 J; blocking 600 J.
TEST(Replay, HandWorkedMixedClocks) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  ASSERT_EQ(plan.stages[1][2].instruction.microbatch, 1);
  ASSERT_EQ(plan.stages[1][2].instruction.kind, kForward);
  plan.stages[1][2].mhz = kSlow;
  const ReplayResult result = Replay(schedule, TwoStageProfile(), plan, 50);
  EXPECT_DOUBLE_EQ(result.time_s, 15);
  EXPECT_DOUBLE_EQ(result.busy_energy_j, 1370);
  EXPECT_DOUBLE_EQ(result.blocking_energy_j, 600);
  EXPECT_DOUBLE_EQ(result.energy_j, 1970);
}

// GPipe, S=2, M=2:
//   s0 F0 [0,1] F1 [1,2]
//   s1 F0 [1,3] F1 [3,5] B0 [5,8] B1 [8,11]
//   s0 B0 [8,10] B1 [11,13]
// T = 13 again; no blocking energy with P_block = 0.
TEST(Replay, HandWorkedGPipeWithoutBlockingPower) {
  const Schedule schedule = Build(MakeSpec(Kind::kGPipe, 2, 2));
  const ReplayResult result = Replay(schedule, TwoStageProfile(), UniformPlan(schedule, kFast), 0);
  EXPECT_DOUBLE_EQ(result.time_s, 13);
  EXPECT_DOUBLE_EQ(result.busy_energy_j, 1400);
  EXPECT_DOUBLE_EQ(result.blocking_energy_j, 0);
  EXPECT_DOUBLE_EQ(result.energy_j, 1400);
}

// Interleaved S=1, V=2, M=1: one GPU holds both virtual stages, so the chain
// c0F0 -> c1F0 -> c1B0 -> c0B0 runs back to back: T = 1 + 2 + 4 + 3 = 10.
// The profile has 2 = S*V stages, so chunk 1 uses profile stage 1.
TEST(Replay, InterleavedUsesVirtualStageProfile) {
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 1, 1, 2));
  model::Profile profile;
  profile.Add(0, kForward, Point(kFast, 1, 10));
  profile.Add(0, kBackward, Point(kFast, 3, 30));
  profile.Add(1, kForward, Point(kFast, 2, 20));
  profile.Add(1, kBackward, Point(kFast, 4, 40));
  const ReplayResult result = Replay(schedule, profile, UniformPlan(schedule, kFast), 7);
  EXPECT_DOUBLE_EQ(result.time_s, 10);
  EXPECT_DOUBLE_EQ(result.busy_energy_j, 100);
  EXPECT_DOUBLE_EQ(result.blocking_energy_j, 0);
}

TEST(Replay, ProfileStageMapping) {
  const Spec spec = MakeSpec(Kind::kInterleaved, 4, 8, 2);
  Instruction instruction;
  instruction.stage = 3;
  instruction.chunk = 1;
  EXPECT_EQ(ProfileStage(spec, 8, instruction), 7);  // one row per virtual stage
  EXPECT_EQ(ProfileStage(spec, 4, instruction), 3);  // one row per GPU
  const Spec plain = MakeSpec(Kind::k1F1B, 4, 8);
  instruction.chunk = 0;
  EXPECT_EQ(ProfileStage(plain, 4, instruction), 3);
}

TEST(ReplayErrors, WrongOrderNamesStageAndPosition) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  std::swap(plan.stages[0][1], plan.stages[0][2]);  // F0 B0 F1 B1 instead of F0 F1 B0 B1
  const std::string message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "plan.json: stage 0 position 1");
  ExpectContains(message, "is backward microbatch 0");
  ExpectContains(message, "1f1b schedule runs forward microbatch 1 there");
  ExpectContains(message, "re-plan with the same Spec::kind, Spec::stages and Spec::microbatches");
  EXPECT_EQ(message.find("--"), std::string::npos) << message;
}

TEST(ReplayErrors, MissingInstructionNamesStageAndPosition) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.stages[1].erase(plan.stages[1].begin() + 2);  // drop F1
  std::string message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "stage 1 position 2");
  ExpectContains(message, "forward microbatch 1");

  plan = UniformPlan(schedule, kFast);
  plan.stages[1].pop_back();  // drop the last B1
  message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "stage 1 position 3");
  ExpectContains(message, "missing");
}

TEST(ReplayErrors, ExtraInstructionNamesStageAndPosition) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.stages[0].push_back(plan.stages[0].back());
  const std::string message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "stage 0 position 4");
  ExpectContains(message, "only 4 instructions");
}

TEST(ReplayErrors, InstructionListedUnderAnotherStage) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.stages[0][3].instruction.stage = 1;
  const std::string message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "stage 0 position 3");
  ExpectContains(message, "of stage 1");
}

TEST(ReplayErrors, InterleavedMismatchNamesChunk) {
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 2, 4, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.stages[1][2].instruction.chunk = 0;  // stage 1 runs c1F0 at position 2
  const std::string message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "stage 1 position 2 is chunk 0 forward microbatch 0");
  ExpectContains(message, "runs chunk 1 forward microbatch 0 there");
  ExpectContains(message, "Spec::microbatches and Spec::chunks");
}

TEST(ReplayErrors, UnknownClockNamesStagePositionAndMhz) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.stages[1][3].mhz = 1234;
  std::string message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "plan.json: stage 1 position 3");
  ExpectContains(message, "backward microbatch 1");
  ExpectContains(message, "1234 MHz");

  // kSlow exists for stage 1 forwards only.
  plan = UniformPlan(schedule, kFast);
  plan.stages[0][0].mhz = kSlow;
  message = ErrorOf(schedule, TwoStageProfile(), plan);
  ExpectContains(message, "stage 0 position 0");
  ExpectContains(message, "1000 MHz");
  ExpectContains(message, "1410..1410 MHz");
}

TEST(ReplayErrors, ProfileWithoutTheStage) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 3, 2));
  const std::string message = ErrorOf(schedule, TwoStageProfile(), UniformPlan(schedule, kFast));
  ExpectContains(message, "stage 2 position 0");
  ExpectContains(message, "profile stage 2");
}

TEST(ReplayErrors, HeaderMismatch) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  const model::Profile profile = TwoStageProfile();
  model::Plan plan = UniformPlan(schedule, kFast);
  plan.num_stages = 3;
  ExpectContains(ErrorOf(schedule, profile, plan), "num_stages is 3");
  plan = UniformPlan(schedule, kFast);
  plan.num_microbatches = 4;
  ExpectContains(ErrorOf(schedule, profile, plan), "num_microbatches is 4");
  plan = UniformPlan(schedule, kFast);
  plan.num_chunks = 2;
  ExpectContains(ErrorOf(schedule, profile, plan), "num_chunks is 2");
  plan = UniformPlan(schedule, kFast);
  plan.schedule = "gpipe";
  ExpectContains(ErrorOf(schedule, profile, plan), "schedule is 'gpipe'");
  plan = UniformPlan(schedule, kFast);
  plan.stages.pop_back();
  ExpectContains(ErrorOf(schedule, profile, plan), "stage lists is 1");
}

TEST(ReplayErrors, NegativeBlockingPower) {
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  EXPECT_THROW(Replay(schedule, TwoStageProfile(), UniformPlan(schedule, kFast), -1),
               model::InputError);
}

// A hand-assembled schedule whose last stage runs B0 before F0 can never
// finish: the walk must report the stuck stages rather than loop or guess.
TEST(ReplayErrors, DeadlockingScheduleIsReported) {
  Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  std::swap(schedule.stage_order[1][0], schedule.stage_order[1][1]);
  const std::string message = ErrorOf(schedule, TwoStageProfile(), UniformPlan(schedule, kFast));
  ExpectContains(message, "deadlock");
  ExpectContains(message, "stage 1 position 0 (backward microbatch 0)");
  ExpectContains(message, "stage 0 position 2 (backward microbatch 0)");
}

// Longest path over the schedule's DAG in topological order: an independent
// formulation of the same iteration time.
double LongestPath(const Schedule& schedule, const std::vector<double>& time) {
  std::vector<double> end(schedule.num_nodes(), 0);
  double finish = 0;
  for (int v : schedule.topological_order) {
    double start = 0;
    for (int u : schedule.predecessors[v]) start = std::max(start, end[u]);
    end[v] = start + time[v];
    finish = std::max(finish, end[v]);
  }
  return finish;
}

TEST(Replay, MatchesLongestPathOnRandomShapesAndClocks) {
  std::mt19937 random(77);
  const std::vector<int> clocks = {1410, 1200, 900};
  for (int trial = 0; trial < 200; ++trial) {
    const int stages = std::uniform_int_distribution<int>(1, 6)(random);
    const Kind kind = static_cast<Kind>(std::uniform_int_distribution<int>(0, 2)(random));
    int microbatches = std::uniform_int_distribution<int>(1, 10)(random);
    int chunks = 1;
    if (kind == Kind::kInterleaved) {
      microbatches = stages * std::uniform_int_distribution<int>(1, 3)(random);
      chunks = std::uniform_int_distribution<int>(2, 3)(random);
    }
    const Schedule schedule = Build(MakeSpec(kind, stages, microbatches, chunks));
    SCOPED_TRACE(std::string(KindName(kind)) + " S=" + std::to_string(stages) +
                 " M=" + std::to_string(microbatches) + " V=" + std::to_string(chunks));

    // Per-virtual-stage profile half the time, per-GPU the other half.
    const int profile_stages =
        std::uniform_int_distribution<int>(0, 1)(random) ? stages * chunks : stages;
    model::Profile profile;
    std::uniform_real_distribution<double> seconds(0.1, 3.0);
    for (int p = 0; p < profile_stages; ++p) {
      for (model::Kind k : {kForward, kBackward}) {
        for (int mhz : clocks)
          profile.Add(p, k, Point(mhz, seconds(random), seconds(random) * 100));
      }
    }

    model::Plan plan = UniformPlan(schedule, clocks[0]);
    std::vector<double> time(schedule.num_nodes());
    double busy_energy = 0;
    std::vector<double> busy(stages, 0);
    for (int s = 0; s < stages; ++s) {
      for (model::PlannedInstruction& planned : plan.stages[s]) {
        planned.mhz = clocks[std::uniform_int_distribution<int>(0, 2)(random)];
        const Instruction& instruction = planned.instruction;
        const model::ClockPoint* point =
            profile.Find(ProfileStage(schedule.spec, profile_stages, instruction), instruction.kind,
                         planned.mhz);
        ASSERT_NE(point, nullptr);
        time[schedule.Find(instruction)] = point->time_s;
        busy_energy += point->energy_j;
        busy[s] += point->time_s;
      }
    }
    const double p_block = 60;
    const ReplayResult result = Replay(schedule, profile, plan, p_block);
    const double expected_time = LongestPath(schedule, time);
    EXPECT_NEAR(result.time_s, expected_time, 1e-9 * expected_time);
    EXPECT_NEAR(result.busy_energy_j, busy_energy, 1e-9 * busy_energy);
    double idle = 0;
    for (double b : busy) idle += expected_time - b;
    EXPECT_NEAR(result.blocking_energy_j, p_block * idle, 1e-6 + 1e-9 * p_block * idle);
    EXPECT_NEAR(result.energy_j, result.busy_energy_j + result.blocking_energy_j,
                1e-9 * result.energy_j);
  }
}

TEST(Replay, LargeShapeIsFast) {
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 8, 96, 4));
  model::Profile profile;
  for (int p = 0; p < 8; ++p) {
    profile.Add(p, kForward, Point(kFast, 1, 1));
    profile.Add(p, kBackward, Point(kFast, 2, 2));
  }
  const ReplayResult result = Replay(schedule, profile, UniformPlan(schedule, kFast), 0);
  // Every stage is busy 96*4*3 s; the pipeline cannot be shorter than that.
  EXPECT_GE(result.time_s, 96 * 4 * 3);
  EXPECT_DOUBLE_EQ(result.busy_energy_j, 8 * 96 * 4 * 3);
}

}  // namespace
}  // namespace joulepipe::schedule

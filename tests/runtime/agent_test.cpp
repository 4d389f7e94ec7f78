// Agent against a fake ClockControl: execute mode, idle clock, the fail-safe
// rules, disabled mode and profile mode.
#include "joulepipe/runtime/agent.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "joulepipe/monitor/monitor.hpp"
#include "runtime_test_support.hpp"

namespace joulepipe::runtime {
namespace {

using model::Kind;
using testing::FakeControl;
using testing::FakeMeter;
using testing::RecordingSource;
using testing::RunStep;
using testing::SimplePlan;
using Calls = std::vector<std::string>;

#define EXPECT_CONTAINS(text, needle)                          \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (needle) << "\" not in: " << (text)

struct Fixture {
  explicit Fixture(std::optional<int> idle = std::nullopt) {
    AgentOptions options;
    options.nvml_index = 2;
    options.control = control;
    options.idle_clock_mhz = idle;
    options.log = [this](const std::string& line) { log.push_back(line); };
    options.meter = meter;
    options.counter_period_s = 0.01;
    agent = std::make_unique<Agent>(std::move(options));
  }
  int Fallbacks() const {
    int n = 0;
    for (const std::string& line : log) n += line.find("fell back") != std::string::npos;
    return n;
  }
  std::shared_ptr<FakeControl> control = std::make_shared<FakeControl>();
  std::shared_ptr<FakeMeter> meter = std::make_shared<FakeMeter>();
  std::vector<std::string> log;
  std::unique_ptr<Agent> agent;
};

TEST(AgentTest, StartsOffAndHooksAreNoOps) {
  Fixture f;
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  RunStep(*f.agent, SimplePlan(2, 1000, 1200));
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_TRUE(f.control->calls().empty());
  EXPECT_EQ(f.agent->stats().instruction_begins, 0u);
  EXPECT_FALSE(f.agent->fallback_reason());
}

TEST(AgentTest, ExecutesThePlanClockPerInstruction) {
  Fixture f;
  const auto plan = SimplePlan(2, 1000, 1200);
  f.agent->SetPlan(plan);
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1000);
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  f.agent->OnInstructionBegin(Kind::kForward, 1, 0);
  f.agent->OnInstructionEnd(Kind::kForward, 1, 0);
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1200);
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnInstructionBegin(Kind::kBackward, 1, 0);
  f.agent->OnInstructionEnd(Kind::kBackward, 1, 0);
  f.agent->OnStepEnd();
  // Step end resets the position: the next step runs the same plan.
  RunStep(*f.agent, plan);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  EXPECT_FALSE(f.agent->fallback_reason());
  const Stats s = f.agent->stats();
  EXPECT_EQ(s.requested, 10u);  // 8 instructions, 2 step ends (default clocks)
  EXPECT_EQ(s.applied + s.restores + s.skipped + s.coalesced, 10u);
  EXPECT_EQ(s.step_begins, 2u);
  EXPECT_EQ(s.step_ends, 2u);
  EXPECT_EQ(s.instruction_begins, 8u);
  EXPECT_EQ(s.instruction_ends, 8u);
  for (const std::string& call : f.control->calls()) {
    EXPECT_TRUE(call == "lock 2 1000 1000" || call == "lock 2 1200 1200" || call == "restore")
        << call;
  }
  EXPECT_EQ(f.control->calls().back(), "restore");  // the step end's
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 0);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1000);
  f.agent.reset();  // the destructor restores
  EXPECT_EQ(f.control->calls().back(), "restore");
}

TEST(AgentTest, PlannedKnobsFollowThePlanPosition) {
  Fixture f;
  auto plan = SimplePlan(1, 1000, 1200);
  plan[0].knobs = "overlap=2;comm_sms=12";  // forward 0; backward 0 has none
  EXPECT_EQ(f.agent->planned_knobs(), "");  // off
  f.agent->SetPlan(plan);
  f.agent->OnStepBegin();
  EXPECT_EQ(f.agent->planned_knobs(), "overlap=2;comm_sms=12");  // the next instruction
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  EXPECT_EQ(f.agent->planned_knobs(), "overlap=2;comm_sms=12");  // the running one
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  EXPECT_EQ(f.agent->planned_knobs(), "");
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  EXPECT_EQ(f.agent->planned_knobs(), "");
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnStepEnd();
  EXPECT_EQ(f.agent->planned_knobs(), "overlap=2;comm_sms=12");  // the next step's first
  // A mismatch falls back: no knobs any more.
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  EXPECT_EQ(f.agent->planned_knobs(), "");
}

TEST(AgentTest, PowerLimitPlanSetsTheLimitOnceAndLocksNoClock) {
  Fixture f(/*idle=*/600);
  const auto plan = SimplePlan(2, 1000, 1200);
  f.agent->SetPowerLimitPlan(plan, 212.5);
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  RunStep(*f.agent, plan);
  RunStep(*f.agent, plan);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls(), std::vector<std::string>({"power 2 212"}));
  EXPECT_EQ(f.agent->stats().last_power_limit_w, 212.5);
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 0);
  EXPECT_EQ(f.agent->stats().instruction_begins, 8u);
  // The sequence is still checked: a mismatch falls back and restores.
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_EQ(f.control->calls().back(), "restore");
  // A clock plan afterwards locks clocks again.
  f.agent->SetPlan(plan);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_power_limit_w, 0.0);
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1000);
}

TEST(AgentTest, IdleClockBetweenInstructions) {
  Fixture f(600);
  f.agent->SetPlan(SimplePlan(1, 1000, 1200));
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1000);
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 600);
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1200);
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());  // (else the step end's default coalesces with it)
  f.agent->OnStepEnd();
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 1000 1000", "lock 2 600 600", "lock 2 1200 1200",
                                       "lock 2 600 600", "restore"}));
}

// A plan with wait_frequency: the wait clock at the instruction's end, the
// next instruction's clock at its begin; a restore that comes due before
// the next begin is applied by the controller (and after the step's last
// instruction it is the default clocks).
TEST(AgentTest, PlannedWaitClocksAndTheirTimedRestore) {
  Fixture f(800);  // the plan's wait clocks take precedence over the idle clock
  std::vector<model::PlannedInstruction> plan = SimplePlan(1, 1000, 1200);
  plan[0].wait_mhz = 600;
  plan[0].wait_restore_s = 0.02;
  plan[1].wait_mhz = 600;
  plan[1].wait_restore_s = 0.02;
  f.agent->SetPlan(plan);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());  // (else the wait clock coalesces with it)
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 600);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the restore comes due
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1200);  // the backward's clock, before it began
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);  // 1200 already: skipped
  ASSERT_TRUE(f.agent->WaitIdle());
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnStepEnd();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 1000 1000", "lock 2 600 600", "lock 2 1200 1200",
                                       "lock 2 600 600", "restore"}));
  const Stats s = f.agent->stats();
  EXPECT_EQ(s.lowered_waits, 2u);
  EXPECT_EQ(s.timed_restores, 2u);
}

// A plan's head wait (model::Plan::head_waits): at the step's beginning the
// wait clock, and the first instruction's clock restored when due, before
// that instruction begins; a power-limit plan locks no clock for it.
TEST(AgentTest, PlannedHeadWaitLowersTheClockAtTheStepsBeginning) {
  Fixture f;
  f.agent->SetPlan(SimplePlan(1, 1000, 1200), model::HeadWait{600, 0.02});
  f.agent->OnStepBegin();
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 600);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the restore comes due
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1000);  // the forward's clock, before it began
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);   // 1000 already: skipped
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());  // (else the step end's default coalesces with it)
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnStepEnd();
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls(),
            Calls({"lock 2 600 600", "lock 2 1000 1000", "lock 2 1200 1200", "restore"}));
  EXPECT_EQ(f.agent->stats().lowered_waits, 1u);
  EXPECT_EQ(f.agent->stats().timed_restores, 1u);
  // SetPlan without one clears it.
  f.agent->SetPlan(SimplePlan(1, 1000, 1200));
  f.agent->OnStepBegin();
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().lowered_waits, 1u);
}

// One step of SimplePlan(1, ...), waiting after every hook until the
// controller has applied it (so no request coalesces).
void RunOneStepSlowly(Agent* agent) {
  agent->OnStepBegin();
  ASSERT_TRUE(agent->WaitIdle());
  for (Kind kind : {Kind::kForward, Kind::kBackward}) {
    agent->OnInstructionBegin(kind, 0, 0);
    ASSERT_TRUE(agent->WaitIdle());
    agent->OnInstructionEnd(kind, 0, 0);
    ASSERT_TRUE(agent->WaitIdle());
  }
  agent->OnStepEnd();
  ASSERT_TRUE(agent->WaitIdle());
}

// A grid plan's hold clock: every instruction's end locks it (it takes
// precedence over the idle clock), the next instruction's begin its own
// clock, and the step's end the default clocks.
TEST(AgentTest, GridPlanHoldsEveryWaitAtItsClock) {
  Fixture f(600);
  model::StageShape shape;
  shape.hold_mhz = 1410;
  f.agent->SetPlan(SimplePlan(1, 1000, 1200), {}, shape);
  for (int step = 0; step < 2; ++step) RunOneStepSlowly(f.agent.get());
  const Calls one = {"lock 2 1000 1000", "lock 2 1410 1410", "lock 2 1200 1200", "lock 2 1410 1410",
                     "restore"};
  Calls two = one;
  two.insert(two.end(), one.begin(), one.end());
  EXPECT_EQ(f.control->calls(), two);
  EXPECT_EQ(f.agent->stats().held_waits, 4u);
  EXPECT_EQ(f.agent->stats().ramp_capped, 0u);
}

// A start ramp caps every clock by the step then due, from the first step
// on, between steps too; after it the plan's own clocks and the default
// clocks between steps. A later SetPlan does not restart it.
TEST(AgentTest, StartRampCapsClocksUntilItIsOver) {
  Fixture f;
  model::StageShape shape;
  shape.hold_mhz = 1410;
  shape.start_ramp_s = 2.0;  // two steps of 1 s: long enough for a loaded machine
  shape.start_ramp_mhz = {300, 1100};
  const auto step = [&f] { RunOneStepSlowly(f.agent.get()); };
  f.agent->SetPlan(SimplePlan(1, 1000, 1200), {}, shape);
  const auto start = std::chrono::steady_clock::now();
  const auto since = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  step();  // within the first second: everything at 300 MHz
  ASSERT_LT(since(), 1.0) << "the machine is too slow for this test's timing";
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 300 300"}));
  std::this_thread::sleep_until(start + std::chrono::milliseconds(1100));
  f.agent->SetPlan(SimplePlan(1, 1000, 1200), {}, shape);  // no restart
  step();  // 1..2 s: capped at 1100 (the forward's 1000 is below it)
  ASSERT_LT(since(), 2.0) << "the machine is too slow for this test's timing";
  EXPECT_EQ(f.control->calls(),
            Calls({"lock 2 300 300", "lock 2 1100 1100", "lock 2 1000 1000", "lock 2 1100 1100"}));
  std::this_thread::sleep_until(start + std::chrono::milliseconds(2100));
  step();  // over: the plan's clocks, the hold clock, the default clocks
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 300 300", "lock 2 1100 1100", "lock 2 1000 1000",
                                       "lock 2 1100 1100", "lock 2 1000 1000", "lock 2 1410 1410",
                                       "lock 2 1200 1200", "lock 2 1410 1410", "restore"}));
  EXPECT_GE(f.agent->stats().ramp_capped, 9u);
}

// The stop ramp: once begun, the start ramp's clocks descending (between
// steps too), then the lowest held; refused without one, and only once.
TEST(AgentTest, StopRampStepsTheClocksDownAndHoldsTheLowest) {
  Fixture f;
  f.agent->SetPlan(SimplePlan(1, 1000, 1200));
  EXPECT_FALSE(f.agent->BeginStopRamp(1.0));  // no stop ramp in the plan
  model::StageShape shape;
  shape.start_ramp_s = 0.001;  // over before the first step's hooks
  shape.start_ramp_mhz = {300, 1100};
  shape.stop_ramp_s = 2.0;
  f.agent->SetPlan(SimplePlan(1, 1000, 1200), {}, shape);
  f.agent->OnStepBegin();  // starts the (already spent) start ramp
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  RunOneStepSlowly(f.agent.get());
  const std::size_t before = f.control->calls().size();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(f.agent->BeginStopRamp(10.0));  // capped at stop_ramp_s: 1 s a clock
  EXPECT_FALSE(f.agent->BeginStopRamp(10.0));
  ASSERT_TRUE(f.agent->WaitIdle());
  RunOneStepSlowly(f.agent.get());  // within the first second: capped at 1100
  ASSERT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0)
      << "the machine is too slow for this test's timing";
  std::this_thread::sleep_until(start + std::chrono::milliseconds(2100));
  RunOneStepSlowly(f.agent.get());  // after it: the lowest, held, between steps too
  const Calls all = f.control->calls();
  const Calls after(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
  EXPECT_EQ(after,
            Calls({"lock 2 1100 1100", "lock 2 1000 1000", "lock 2 1100 1100", "lock 2 300 300"}));
}

TEST(AgentTest, IdleClockAndNextClockCoalesceWhileTheControlIsBusy) {
  Fixture f(600);
  f.agent->SetPlan(SimplePlan(2, 1000, 1200));
  f.control->Hold();
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  f.control->WaitEntered();
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);    // idle 600: replaced
  f.agent->OnInstructionBegin(Kind::kForward, 1, 0);  // 1000
  f.control->Release();
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 1000 1000"}));
  EXPECT_EQ(f.agent->stats().coalesced, 1u);
  EXPECT_EQ(f.agent->stats().skipped, 1u);
}

// Between steps the GPU runs at its default clocks, in execute and profile
// mode: what runs there (the optimizer, a forward-only evaluation pass,
// checkpointing) is not in the plan and is never slowed. A plan that lowers
// the wait after the step's last instruction keeps it, then restores.
TEST(AgentTest, StepEndGivesTheDefaultClocksBack) {
  {
    Fixture f;
    f.agent->SetPlan(SimplePlan(1, 1000, 800));
    f.agent->OnStepBegin();
    f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
    f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
    f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
    ASSERT_TRUE(f.agent->WaitIdle());
    EXPECT_EQ(f.agent->stats().last_applied_mhz, 800);
    f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
    ASSERT_TRUE(f.agent->WaitIdle());
    EXPECT_EQ(f.agent->stats().last_applied_mhz, 800);  // still inside the step
    f.agent->OnStepEnd();
    ASSERT_TRUE(f.agent->WaitIdle());
    EXPECT_EQ(f.agent->stats().last_applied_mhz, 0);
    EXPECT_EQ(f.control->calls().back(), "restore");
    EXPECT_EQ(f.agent->mode(), Mode::kExecute);  // not a fallback
    EXPECT_FALSE(f.agent->fallback_reason());
  }
  {
    Fixture f;
    auto source = std::make_shared<RecordingSource>();
    f.agent->SetProfiler(source);
    f.agent->OnStepBegin();
    f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
    ASSERT_TRUE(f.agent->WaitIdle());
    EXPECT_EQ(f.agent->stats().last_applied_mhz, 1200);
    f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
    f.agent->OnStepEnd();
    ASSERT_TRUE(f.agent->WaitIdle());
    EXPECT_EQ(f.agent->stats().last_applied_mhz, 0);
    EXPECT_EQ(f.agent->mode(), Mode::kProfile);
  }
  {
    Fixture f;
    std::vector<model::PlannedInstruction> plan = SimplePlan(1, 1000, 800);
    plan[1].wait_mhz = 600;
    plan[1].wait_restore_s = 0.03;
    f.agent->SetPlan(plan);
    RunStep(*f.agent, plan);
    ASSERT_TRUE(f.agent->WaitIdle());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the restore comes due
    ASSERT_TRUE(f.agent->WaitIdle());
    EXPECT_EQ(f.agent->stats().last_applied_mhz, 0);
    const Calls calls = f.control->calls();
    ASSERT_GE(calls.size(), 2u);
    EXPECT_EQ(calls[calls.size() - 2], "lock 2 600 600");  // the lowered tail wait ran
    EXPECT_EQ(calls.back(), "restore");
  }
}

TEST(AgentTest, PlanMismatchFallsBackNamingBoth) {
  Fixture f;
  f.agent->SetPlan(SimplePlan(2, 1000, 1200));
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());  // else the restore may coalesce with the 1000
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_EQ(*f.agent->fallback_reason(),
            "plan expected forward mb 1 chunk 0 at position 1, training ran backward mb 0 chunk 0");
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 1000 1000", "restore"}));
  // Training goes on; the hooks are no-ops now and nothing is logged again.
  const Stats before = f.agent->stats();
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnInstructionBegin(Kind::kBackward, 7, 3);
  f.agent->OnStepEnd();
  EXPECT_EQ(f.agent->stats().instruction_begins, before.instruction_begins);
  EXPECT_EQ(f.Fallbacks(), 1);
  EXPECT_CONTAINS(f.log.back(), "plan expected forward mb 1");
}

TEST(AgentTest, ChunkMismatchFallsBack) {
  Fixture f;
  f.agent->SetPlan(SimplePlan(1, 1000, 1200));
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 1);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_CONTAINS(*f.agent->fallback_reason(), "training ran forward mb 0 chunk 1");
}

TEST(AgentTest, StepThatEndedEarlyFallsBack) {
  Fixture f;
  f.agent->SetPlan(SimplePlan(2, 1000, 1200));
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  f.agent->OnStepEnd();
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_CONTAINS(*f.agent->fallback_reason(), "step ended after 1 of 4 planned instructions");
  EXPECT_CONTAINS(*f.agent->fallback_reason(), "plan expected forward mb 1 chunk 0 at position 1");
}

TEST(AgentTest, ExtraInstructionAndUnmatchedEndFallBack) {
  {
    Fixture f;
    const auto plan = SimplePlan(1, 1000, 1200);
    f.agent->SetPlan(plan);
    f.agent->OnStepBegin();
    for (const auto& p : plan) {
      f.agent->OnInstructionBegin(p.instruction.kind, p.instruction.microbatch, 0);
      f.agent->OnInstructionEnd(p.instruction.kind, p.instruction.microbatch, 0);
    }
    f.agent->OnInstructionBegin(Kind::kForward, 1, 0);
    ASSERT_TRUE(f.agent->fallback_reason());
    EXPECT_CONTAINS(*f.agent->fallback_reason(),
                    "plan has 2 instructions per step, training ran a further forward mb 1");
  }
  {
    Fixture f;
    f.agent->SetPlan(SimplePlan(1, 1000, 1200));
    f.agent->OnStepBegin();
    f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
    f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
    ASSERT_TRUE(f.agent->fallback_reason());
    EXPECT_CONTAINS(*f.agent->fallback_reason(),
                    "training ended backward mb 0 chunk 0 but had begun forward mb 0 chunk 0");
  }
}

TEST(AgentTest, ControlErrorRestoresLogsOnceAndTrainingGoesOn) {
  Fixture f;
  f.control->FailAt(1200);
  const auto plan = SimplePlan(2, 1000, 1200);
  f.agent->SetPlan(plan);
  f.agent->OnStepBegin();
  for (const auto& p : plan) {
    f.agent->OnInstructionBegin(p.instruction.kind, p.instruction.microbatch, 0);
    ASSERT_TRUE(f.agent->WaitIdle());  // let the controller see each clock
    f.agent->OnInstructionEnd(p.instruction.kind, p.instruction.microbatch, 0);
  }
  f.agent->OnStepEnd();
  for (int i = 0; i < 3; ++i) RunStep(*f.agent, plan);  // no-ops
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_EQ(*f.agent->fallback_reason(),
            "could not lock GPU 2 at 1200 MHz through fake: fake: clock 1200 rejected");
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 1000 1000", "fail 1200", "restore"}));
  EXPECT_EQ(f.Fallbacks(), 1);
  EXPECT_EQ(f.agent->stats().failed, 1u);

  // A new plan re-arms the agent (and a new failure would log again).
  f.agent->SetPlan(SimplePlan(1, 800, 800));
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  EXPECT_FALSE(f.agent->fallback_reason());
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.control->calls().back(), "lock 2 800 800");
}

TEST(AgentTest, NullControlFallsBackWithoutThrowing) {
  std::vector<std::string> log;
  AgentOptions options;
  options.log = [&](const std::string& line) { log.push_back(line); };
  Agent agent(std::move(options));
  EXPECT_EQ(agent.mode(), Mode::kOff);
  ASSERT_TRUE(agent.fallback_reason());
  EXPECT_CONTAINS(*agent.fallback_reason(), "no clock control");
  agent.SetPlan(SimplePlan(1, 1000, 1200));
  EXPECT_EQ(agent.mode(), Mode::kOff);
  RunStep(agent, SimplePlan(1, 1000, 1200));
  EXPECT_EQ(agent.stats().instruction_begins, 0u);
  EXPECT_EQ(log.size(), 1u);
}

TEST(AgentTest, DisableRestoresAndMakesHooksNoOps) {
  Fixture f;
  const auto plan = SimplePlan(1, 1000, 1200);
  f.agent->SetPlan(plan);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);  // a clock locked, mid-step
  ASSERT_TRUE(f.agent->WaitIdle());
  ASSERT_EQ(f.control->calls(), Calls({"lock 2 1000 1000"}));
  f.agent->Disable();
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  const Stats before = f.agent->stats();
  RunStep(*f.agent, plan);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().instruction_begins, before.instruction_begins);
  EXPECT_EQ(f.control->calls().back(), "restore");
  EXPECT_FALSE(f.agent->fallback_reason());  // disabling is not a failure
}

TEST(AgentTest, EmptyPlanFallsBack) {
  Fixture f;
  f.agent->SetPlan({});
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_CONTAINS(*f.agent->fallback_reason(), "empty");
}

// ---- Profile mode ---------------------------------------------------------------

TEST(AgentProfileTest, ClocksFromTheSourceAndMeasurementsBack) {
  Fixture f;
  auto source = std::make_shared<RecordingSource>();
  f.agent->SetProfiler(source);
  EXPECT_EQ(f.agent->mode(), Mode::kProfile);

  f.agent->OnStepBegin();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a short wait
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 1200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // shorter than the 10 ms period
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);

  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  f.meter->energy_mj += 5000;  // the counter jumps 5 J; the power stays 100 W
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnStepEnd();
  ASSERT_TRUE(f.agent->WaitIdle());

  // At the host's points every window under ten counter periods (100 ms
  // here) is the power sampled during it (1 ms apart): 100 W x its time,
  // whatever the counter did.
  ASSERT_EQ(source->waits.size(), 2u);
  EXPECT_GE(source->waits[0].first, 0.002);
  if (source->waits[0].first < 0.1) {
    EXPECT_NEAR(source->waits[0].second, 100 * source->waits[0].first, 1e-6);
  }  // else a loaded machine overslept ten periods: the counter's delta, 0
  ASSERT_EQ(source->instructions.size(), 2u);
  const auto& fwd = source->instructions[0];
  EXPECT_EQ(fwd.kind, Kind::kForward);
  EXPECT_EQ(fwd.mhz, 1200);
  EXPECT_GE(fwd.seconds, 0.001);
  EXPECT_EQ(fwd.approximate, fwd.seconds < 0.010);  // under ten samples
  EXPECT_NEAR(fwd.joules, 100 * fwd.seconds, 1e-6);
  const auto& bwd = source->instructions[1];
  EXPECT_EQ(bwd.kind, Kind::kBackward);
  EXPECT_EQ(bwd.mhz, 1000);
  EXPECT_GE(bwd.seconds, 0.02);
  EXPECT_FALSE(bwd.approximate);
  if (bwd.seconds < monitor::kCounterPeriodsForExact * 0.010) {
    // The samples, not the counter's jump: one update's weight at an edge
    // could be anything (the monitor's rule, monitor.hpp).
    EXPECT_NEAR(bwd.joules, 100 * bwd.seconds, 1e-6);
  } else {  // a loaded machine overslept ten periods: the counter's delta
    EXPECT_DOUBLE_EQ(bwd.joules, 5.0);
  }
  EXPECT_EQ(source->step_ends, 1);
  EXPECT_EQ(f.control->calls(), Calls({"lock 2 1200 1200", "lock 2 1000 1000", "restore"}));

  // The gap between steps (optimizer step, data loading) is not a wait.
  f.agent->OnInstructionBegin(Kind::kForward, 1, 0);
  EXPECT_EQ(source->waits.size(), 2u);
}

TEST(AgentProfileTest, CounterlessGpuTakesThePowerSampledDuringTheInstruction) {
  Fixture f;
  f.meter->has_counter = false;
  auto source = std::make_shared<RecordingSource>();
  f.agent->SetProfiler(source);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  ASSERT_EQ(source->instructions.size(), 1u);
  EXPECT_EQ(source->instructions[0].approximate, source->instructions[0].seconds < 0.010);
  EXPECT_NEAR(source->instructions[0].joules, 100 * source->instructions[0].seconds, 1e-6);
}

TEST(AgentProfileTest, ThrowingSourceFallsBack) {
  Fixture f;
  auto source = std::make_shared<RecordingSource>();
  source->throw_in_clock_for = true;
  f.agent->SetProfiler(source);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);  // must not throw
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->fallback_reason());
  EXPECT_CONTAINS(*f.agent->fallback_reason(), "profiler broke");
  EXPECT_EQ(f.Fallbacks(), 1);
}

TEST(AgentProfileTest, SwitchingToAPlanAfterProfiling) {
  Fixture f;
  auto source = std::make_shared<RecordingSource>();
  f.agent->SetProfiler(source);
  RunStep(*f.agent, SimplePlan(1, 0, 0));
  const auto plan = SimplePlan(1, 800, 800);
  f.agent->SetPlan(plan);
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  f.agent->OnStepBegin();
  f.agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 800);
  f.agent->OnInstructionEnd(Kind::kForward, 0, 0);
  f.agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  f.agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  f.agent->OnStepEnd();
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_EQ(f.agent->stats().last_applied_mhz, 0);  // the step ended: default clocks
  EXPECT_EQ(source->instructions.size(), 2u);       // only from the profiling step
}

}  // namespace
}  // namespace joulepipe::runtime

// The runtime agent driving clocks unprivileged through joulepiped (the
// production path when training may not set clocks itself): planned clocks
// reach the GPU, and when the training process dies mid-step the daemon
// restores its GPU.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "../daemon/daemon_test_support.hpp"
#include "../runtime/runtime_test_support.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/runtime/agent.hpp"

namespace joulepipe::daemon::testing {
namespace {

using model::Kind;
using runtime::testing::SimplePlan;

// The arguments of the last successful nvmlDeviceSetGpuLockedClocks on `device`.
json LastLock(const DaemonFixture& daemon, int device) {
  json last;
  for (const json& call : daemon.Calls()) {
    if (call["function"] == "nvmlDeviceSetGpuLockedClocks" && call["device"] == device &&
        call["result"] == 0) {
      last = call["args"];
    }
  }
  return last;
}

TEST(AgentThroughDaemon, AppliesThePlanAndRestoresOnExit) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  std::shared_ptr<gpu::ClockControl> control = gpu::MakeDaemonClockControl(daemon.socket());
  const std::vector<int> clocks = control->SupportedSmClocks(1);
  ASSERT_GT(clocks.size(), 20u);
  const int forward = clocks[10], backward = clocks[20];

  runtime::AgentOptions options;
  options.nvml_index = 1;
  options.control = control;
  auto agent = std::make_unique<runtime::Agent>(std::move(options));
  agent->SetPlan(SimplePlan(1, forward, backward));
  agent->OnStepBegin();
  agent->OnInstructionBegin(Kind::kForward, 0, 0);
  ASSERT_TRUE(agent->WaitIdle());
  EXPECT_EQ(LastLock(daemon, 1)["max_mhz"], forward);
  agent->OnInstructionEnd(Kind::kForward, 0, 0);
  agent->OnInstructionBegin(Kind::kBackward, 0, 0);
  ASSERT_TRUE(agent->WaitIdle());
  EXPECT_EQ(LastLock(daemon, 1)["max_mhz"], backward);
  agent->OnInstructionEnd(Kind::kBackward, 0, 0);
  agent->OnStepEnd();
  EXPECT_FALSE(agent->fallback_reason()) << *agent->fallback_reason();
  agent.reset();  // restores through the daemon
  EXPECT_GE(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 1), 1);
}

// A power-limit plan (solver/power_limit_plan.hpp): the limit reaches the
// GPU once, no clock is locked, and the limit is reset when the agent goes.
TEST(AgentThroughDaemon, AppliesAPowerLimitPlanAndRestoresTheLimit) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  std::shared_ptr<gpu::ClockControl> control = gpu::MakeDaemonClockControl(daemon.socket());
  runtime::AgentOptions options;
  options.nvml_index = 1;
  options.control = control;
  auto agent = std::make_unique<runtime::Agent>(std::move(options));
  const auto plan = SimplePlan(2, 1200, 1100);
  agent->SetPowerLimitPlan(plan, 250);
  for (int step = 0; step < 3; ++step) {
    agent->OnStepBegin();
    for (const model::PlannedInstruction& p : plan) {
      agent->OnInstructionBegin(p.instruction.kind, p.instruction.microbatch, 0);
      agent->OnInstructionEnd(p.instruction.kind, p.instruction.microbatch, 0);
    }
    agent->OnStepEnd();
  }
  ASSERT_TRUE(agent->WaitIdle());
  EXPECT_FALSE(agent->fallback_reason()) << *agent->fallback_reason();
  json set;
  for (const json& call : daemon.Calls()) {
    if (call["function"] == "nvmlDeviceSetPowerManagementLimit" && call["device"] == 1) {
      set = call;
    }
  }
  ASSERT_FALSE(set.is_null());
  EXPECT_EQ(set["result"], 0) << set.dump();
  EXPECT_EQ(set["args"]["limit_mw"], 250000) << set.dump();
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceSetPowerManagementLimit", 1), 1);
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceSetGpuLockedClocks", 1), 0);
  agent.reset();  // restores through the daemon: the limit back to its default
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceSetPowerManagementLimit", 1), 2) << set.dump();
}

TEST(AgentThroughDaemon, DaemonRestoresWhenTrainingIsKilledMidStep) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "training process": takes its lease, applies a clock, then dies
    // without any chance to clean up.
    std::shared_ptr<gpu::ClockControl> control = gpu::MakeDaemonClockControl(daemon.socket());
    const int clock = control->SupportedSmClocks(0)[15];
    runtime::AgentOptions options;
    options.nvml_index = 0;
    options.control = control;
    runtime::Agent agent(std::move(options));
    agent.SetPlan(SimplePlan(1, clock, clock));
    agent.OnStepBegin();
    agent.OnInstructionBegin(Kind::kForward, 0, 0);
    agent.WaitIdle();
    ::raise(SIGKILL);
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(LastLock(daemon, 0).is_null()) << "the killed agent never locked a clock";
  EXPECT_TRUE(WaitFor([&] { return daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0) >= 1; }))
      << "the daemon did not restore GPU 0 after its client was killed";
}

}  // namespace
}  // namespace joulepipe::daemon::testing

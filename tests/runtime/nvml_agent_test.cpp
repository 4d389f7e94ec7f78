// The agent with direct NVML control (gpu::MakeNvmlClockControl) against the
// simulated libnvidia-ml.so.1, each test in a child process
// (tests/gpu/sim_nvml_child.hpp says why).
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../gpu/sim_nvml_child.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "runtime_test_support.hpp"

namespace joulepipe::runtime {
namespace {

using gpu::testing::RunInChild;
using gpu::testing::SimEnv;
using gpu::testing::TempFile;
using model::Kind;
using testing::SimplePlan;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int SmClock(int nvml_index) {
  for (const gpu::Device& d : gpu::ListAllDevices()) {
    if (static_cast<int>(d.nvml_index()) == nvml_index) {
      return d.CurrentClock(gpu::ClockDomain::kSm);
    }
  }
  return -1;
}

TEST(NvmlAgentTest, AppliesPlannedClocksAndRestoresThem) {
  TempFile log_file("");
  TempFile config(R"({"gpu": "a100-sxm4-80gb", "count": 2, "permissions": {"clocks": true},
                      "call_log": ")" +
                  log_file.path() + R"("})");
  RunInChild(SimEnv(config.path()), [&] {
    std::shared_ptr<gpu::ClockControl> control = gpu::MakeNvmlClockControl();
    EXPECT_CONTAINS(control->Describe(), "nvml (");
    const std::vector<int> clocks = control->SupportedSmClocks(1);
    ASSERT_GT(clocks.size(), 20u);
    const int lowest = clocks.back();
    const int forward = clocks[10];
    const int backward = clocks[20];
    // Idle simulated GPUs report their lowest allowed clock: the locked
    // minimum once locked (docs/sim-nvml.md).
    EXPECT_EQ(SmClock(1), lowest);

    std::vector<std::string> log;
    AgentOptions options;
    options.nvml_index = 1;
    options.control = control;
    options.log = [&](const std::string& line) { log.push_back(line); };
    auto agent = std::make_unique<Agent>(std::move(options));
    agent->SetPlan(SimplePlan(2, forward, backward));
    agent->OnStepBegin();
    agent->OnInstructionBegin(Kind::kForward, 0, 0);
    ASSERT_TRUE(agent->WaitIdle());
    EXPECT_EQ(SmClock(1), forward);
    EXPECT_EQ(SmClock(0), lowest);  // the other GPU untouched
    agent->OnInstructionEnd(Kind::kForward, 0, 0);
    agent->OnInstructionBegin(Kind::kForward, 1, 0);
    agent->OnInstructionEnd(Kind::kForward, 1, 0);
    agent->OnInstructionBegin(Kind::kBackward, 0, 0);
    ASSERT_TRUE(agent->WaitIdle());
    EXPECT_EQ(SmClock(1), backward);
    agent->OnInstructionEnd(Kind::kBackward, 0, 0);
    agent->OnInstructionBegin(Kind::kBackward, 1, 0);
    agent->OnInstructionEnd(Kind::kBackward, 1, 0);
    agent->OnStepEnd();
    EXPECT_FALSE(agent->fallback_reason());
    agent.reset();  // restores
    EXPECT_EQ(SmClock(1), lowest);

    // The simulated library's call log: one JSON object per setter call.
    std::vector<std::string> lines;
    std::istringstream calls(ReadAll(log_file.path()));
    for (std::string line; std::getline(calls, line);) lines.push_back(line);
    // The permission probe (a reset while nothing is set), forward clock,
    // backward clock, reset.
    ASSERT_EQ(lines.size(), 4u);
    for (const std::string& line : lines) EXPECT_CONTAINS(line, "\"device\":1,");
    EXPECT_CONTAINS(lines[0], "\"function\":\"nvmlDeviceResetGpuLockedClocks\"");
    EXPECT_CONTAINS(lines[1], "\"function\":\"nvmlDeviceSetGpuLockedClocks\"");
    EXPECT_CONTAINS(lines[1], "\"max_mhz\":" + std::to_string(forward) +
                                  ",\"min_mhz\":" + std::to_string(forward));
    EXPECT_CONTAINS(lines[2], "\"max_mhz\":" + std::to_string(backward));
    EXPECT_CONTAINS(lines[3], "\"function\":\"nvmlDeviceResetGpuLockedClocks\"");
  });
}

// Clocks while waiting on the simulated GPU (its "wait" section: 60 W
// blocked at 210 MHz): the plan's wait clock is applied at the forward's end
// and the GPU draws less while it waits; the timed restore puts the
// backward's clock back before the backward begins.
TEST(NvmlAgentTest, PlannedWaitClockLowersTheWaitAndIsRestoredInTime) {
  TempFile config(R"({"gpu": "a100-sxm4-80gb", "permissions": {"clocks": true},
                      "power_reading": "instant",
                      "load": [{"start_s": -1e9, "end_s": 1e9, "utilization": 0}],
                      "wait": {"blocked_w_at_min_clock": 60}})");
  RunInChild(SimEnv(config.path()), [&] {
    std::shared_ptr<gpu::ClockControl> control = gpu::MakeNvmlClockControl();
    AgentOptions options;
    options.control = control;
    options.log = [](const std::string&) {};
    Agent agent(std::move(options));
    std::vector<model::PlannedInstruction> plan = SimplePlan(1, 1410, 1200);
    plan[0].wait_mhz = 210;
    plan[0].wait_restore_s = 0.05;
    agent.SetPlan(plan);
    const gpu::Device device = gpu::ListAllDevices().at(0);
    agent.OnStepBegin();
    agent.OnInstructionBegin(Kind::kForward, 0, 0);
    ASSERT_TRUE(agent.WaitIdle());
    const double computing_wait_w = device.InstantPower().watts();  // blocked at 1410 MHz
    agent.OnInstructionEnd(Kind::kForward, 0, 0);
    ASSERT_TRUE(agent.WaitIdle());
    EXPECT_EQ(SmClock(0), 210);
    EXPECT_NEAR(device.InstantPower().watts(), 60.0, 0.01);
    EXPECT_LT(device.InstantPower().watts(), computing_wait_w - 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_EQ(SmClock(0), 1200);  // restored before the backward began
    agent.OnInstructionBegin(Kind::kBackward, 0, 0);
    agent.OnInstructionEnd(Kind::kBackward, 0, 0);
    agent.OnStepEnd();
    EXPECT_FALSE(agent.fallback_reason());
    EXPECT_EQ(agent.stats().lowered_waits, 1u);
    EXPECT_EQ(agent.stats().timed_restores, 1u);
  });
}

TEST(NvmlAgentTest, NoPermissionFallsBackAndSaysToUseTheDaemon) {
  TempFile config(R"({"gpu": "h100-sxm"})");
  RunInChild(SimEnv(config.path()), [&] {
    std::shared_ptr<gpu::ClockControl> control = gpu::MakeNvmlClockControl();
    const int clock = control->SupportedSmClocks(0).at(5);
    std::vector<std::string> log;
    AgentOptions options;
    options.control = control;
    options.log = [&](const std::string& line) { log.push_back(line); };
    Agent agent(std::move(options));
    agent.SetPlan(SimplePlan(1, clock, clock));
    EXPECT_EQ(agent.mode(), Mode::kOff);  // at once, before any hook
    agent.OnStepBegin();
    agent.OnInstructionBegin(Kind::kForward, 0, 0);
    ASSERT_TRUE(agent.WaitIdle());
    agent.OnInstructionEnd(Kind::kForward, 0, 0);  // no-op or not: must not throw
    agent.OnInstructionBegin(Kind::kBackward, 0, 0);
    agent.OnInstructionEnd(Kind::kBackward, 0, 0);
    agent.OnStepEnd();
    EXPECT_EQ(agent.mode(), Mode::kOff);
    ASSERT_TRUE(agent.fallback_reason());
    const std::string reason = *agent.fallback_reason();
    // Refused before any plan runs (issue 56: "applied" was said first).
    EXPECT_CONTAINS(reason, "cannot change GPU 0's clocks through nvml");
    EXPECT_CONTAINS(reason, "nvmlDeviceResetGpuLockedClocks failed on GPU 0");
    EXPECT_CONTAINS(reason, "(NVML error 4)");
    EXPECT_CONTAINS(reason, "joulepiped");
    int fallbacks = 0;
    for (const std::string& line : log) fallbacks += line.find("fell back") != std::string::npos;
    EXPECT_EQ(fallbacks, 1);
  });
}

TEST(NvmlAgentTest, UnsupportedClockIsRejectedAndFallsBack) {
  TempFile config(R"({"gpu": "a100-sxm4-80gb", "permissions": {"clocks": true}})");
  RunInChild(SimEnv(config.path()), [&] {
    std::shared_ptr<gpu::ClockControl> control = gpu::MakeNvmlClockControl();
    AgentOptions options;
    options.control = control;
    options.log = [](const std::string&) {};
    Agent agent(std::move(options));
    agent.SetPlan(SimplePlan(1, 1234, 1234));
    agent.OnStepBegin();
    agent.OnInstructionBegin(Kind::kForward, 0, 0);
    ASSERT_TRUE(agent.WaitIdle());
    ASSERT_TRUE(agent.fallback_reason());
    EXPECT_CONTAINS(*agent.fallback_reason(), "1234 MHz is not a supported SM clock of GPU 0");
  });
}

TEST(NvmlClockControlTest, RestoreResetsWhatItChanged) {
  TempFile config(
      R"({"gpu": "h100-sxm", "count": 2, "permissions": {"clocks": true, "power_limit": true}})");
  RunInChild(SimEnv(config.path()), [&] {
    auto control = gpu::MakeNvmlClockControl();
    const std::vector<gpu::Device> devices = gpu::ListAllDevices();
    const double default_w = devices[0].GetPowerLimits().default_w;
    const int clock = control->SupportedSmClocks(0).at(3);
    control->SetLockedClocks(0, clock, clock);
    control->SetPowerLimit(1, default_w - 100);
    EXPECT_EQ(devices[0].CurrentClock(gpu::ClockDomain::kSm), clock);
    EXPECT_DOUBLE_EQ(devices[1].GetPowerLimits().current_w, default_w - 100);
    EXPECT_THROW(control->SetLockedClocks(0, clock, clock - 1), gpu::GpuError);
    EXPECT_THROW(control->SetLockedClocks(7, clock, clock), gpu::GpuArgumentError);
    control->Restore();
    EXPECT_LT(devices[0].CurrentClock(gpu::ClockDomain::kSm), clock);
    EXPECT_DOUBLE_EQ(devices[1].GetPowerLimits().current_w, default_w);
    // And the destructor restores too.
    control->SetLockedClocks(1, clock, clock);
    control.reset();
    EXPECT_LT(devices[1].CurrentClock(gpu::ClockDomain::kSm), clock);
  });
}

}  // namespace
}  // namespace joulepipe::runtime

// RunInWindow: the command's exit code and signal death are kept, a command
// that cannot run is named, a signal the caller takes is forwarded to the
// command's group, and the window spans the command (CPU-only monitor: no
// NVML needed).
#include "joulepipe/monitor/command_window.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace joulepipe::monitor {
namespace {

MonitorOptions NoDevices() {
  MonitorOptions o;
  o.gpus = std::vector<int>{};
  o.cpu = CpuMode::kOff;
  return o;
}

TEST(RunInWindow, KeepsTheExitCodeAndTimesTheCommand) {
  const auto signals = TakeSignalsForCommand();
  Monitor meter(NoDevices());
  const CommandRun run = RunInWindow(meter, {"sh", "-c", "sleep 0.2; exit 3"}, *signals);
  EXPECT_TRUE(run.started);
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_TRUE(run.measure_error.empty()) << run.measure_error;
  EXPECT_GE(run.measurement.duration_s, 0.19);
  EXPECT_LT(run.measurement.duration_s, 2.0);
}

TEST(RunInWindow, ACommandThatCannotRunIsNamed) {
  const auto signals = TakeSignalsForCommand();
  Monitor meter(NoDevices());
  const CommandRun run = RunInWindow(meter, {"/no/such/joulepipe-command"}, *signals);
  EXPECT_FALSE(run.started);
  EXPECT_EQ(run.exit_code, kExitCannotRun);
  EXPECT_NE(run.not_run.find("cannot run /no/such/joulepipe-command"), std::string::npos)
      << run.not_run;
  EXPECT_THROW(RunInWindow(meter, {}, *signals), std::invalid_argument);
}

TEST(RunInWindow, ATakenSignalIsForwardedAndTheDeathReported) {
  const auto signals = TakeSignalsForCommand();
  Monitor meter(NoDevices());
  // SIGTERM to this process while the command runs: taken (blocked here),
  // forwarded to the command's group, which dies of it.
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGTERM);
  });
  const CommandRun run = RunInWindow(meter, {"sleep", "10"}, *signals);
  sender.join();
  EXPECT_TRUE(run.started);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM);
  EXPECT_EQ(run.exit_note, "killed by SIGTERM");
  EXPECT_LT(run.measurement.duration_s, 5.0);
}

}  // namespace
}  // namespace joulepipe::monitor

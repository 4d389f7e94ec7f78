// gpu::MakeDaemonClockControl (clock_control.hpp) against the built daemon.
#include <gtest/gtest.h>

#include "daemon_test_support.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/error.hpp"

namespace joulepipe::daemon::testing {
namespace {

TEST(DaemonClockControl, SaysHowToStartTheDaemonWhenNoneListens) {
  const std::string path = "/tmp/joulepiped-test-none-" + std::to_string(::getpid()) + ".sock";
  try {
    gpu::MakeDaemonClockControl(path);
    FAIL() << "no error";
  } catch (const gpu::GpuError& e) {
    EXPECT_CONTAINS(e.what(), "no joulepiped at " + path + ": connect failed");
    EXPECT_CONTAINS(e.what(), "systemctl start joulepiped");
  }
}

TEST(DaemonClockControl, SetsResetsAndRestores) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  {
    auto control = gpu::MakeDaemonClockControl(daemon.socket());
    EXPECT_EQ(control->Describe(), "joulepiped (" + daemon.socket() + ")");
    const std::vector<int> clocks = control->SupportedSmClocks(0);
    ASSERT_GT(clocks.size(), 10u);
    control->SetLockedClocks(0, clocks[8], clocks[2]);
    control->ResetLockedClocks(0);
    EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);

    // The contract: no clamping; unsupported or inverted is an error.
    EXPECT_THROW(control->SetLockedClocks(0, clocks[2], clocks[8]), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetLockedClocks(0, clocks[2] + 1, clocks[2] + 1), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetPowerLimit(0, 1), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetLockedClocks(9, clocks[2], clocks[2]), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetLockedClocks(2, clocks[2], clocks[2]), gpu::MigError);

    control->SetLockedClocks(1, clocks[3], clocks[3]);
    control->SetPowerLimit(0, 300);
    control->Restore();
    EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 1), 1);
    control->SetLockedClocks(0, clocks[3], clocks[3]);
  }  // the destructor restores too
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 2);

  // A lease conflict surfaces as the daemon's message.
  auto first = gpu::MakeDaemonClockControl(daemon.socket());
  auto second = gpu::MakeDaemonClockControl(daemon.socket());
  const std::vector<int> clocks = first->SupportedSmClocks(0);
  first->SetLockedClocks(0, clocks[0], clocks[0]);
  try {
    second->SetLockedClocks(0, clocks[0], clocks[0]);
    FAIL() << "no error";
  } catch (const gpu::GpuError& e) {
    EXPECT_CONTAINS(e.what(), "set_locked_clocks on GPU 0: GPU 0 (");
    EXPECT_CONTAINS(e.what(), "is leased to client pid");
  }
}

TEST(DaemonClockControl, ReportsADaemonThatWentAway) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  auto control = gpu::MakeDaemonClockControl(daemon.socket());
  const std::vector<int> clocks = control->SupportedSmClocks(0);
  daemon.Stop();
  try {
    control->SetLockedClocks(0, clocks[0], clocks[0]);
    FAIL() << "no error";
  } catch (const gpu::GpuError& e) {
    EXPECT_CONTAINS(e.what(), "closed the connection");
  }
  control->Restore();  // never throws
}

}  // namespace
}  // namespace joulepipe::daemon::testing

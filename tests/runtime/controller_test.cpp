// ClockController against a fake ClockControl: coalescing, no-op skipping,
// restore on failure and at destruction.
#include "joulepipe/runtime/controller.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_test_support.hpp"

namespace joulepipe::runtime {
namespace {

using testing::FakeControl;
using Calls = std::vector<std::string>;

TEST(ClockControllerTest, AppliesLockedClocksMinEqualsMax) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 3, nullptr);
  controller.Request(1200);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 3 1200 1200"}));
  EXPECT_EQ(controller.stats().applied, 1u);
  EXPECT_EQ(controller.stats().last_applied_mhz, 1200);
}

TEST(ClockControllerTest, SkipsTheClockAlreadyApplied) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 0, nullptr);
  controller.Request(1000);
  ASSERT_TRUE(controller.WaitIdle(5));
  controller.Request(1000);
  ASSERT_TRUE(controller.WaitIdle(5));
  controller.Request(ClockController::kDefaultClocks);  // restores
  ASSERT_TRUE(controller.WaitIdle(5));
  controller.Request(ClockController::kDefaultClocks);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 0 1000 1000", "restore"}));
  const ControllerStats s = controller.stats();
  EXPECT_EQ(s.requested, 4u);
  EXPECT_EQ(s.applied, 1u);
  EXPECT_EQ(s.restores, 1u);
  EXPECT_EQ(s.skipped, 2u);
}

TEST(ClockControllerTest, CoalescesABurstLatestWins) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 0, nullptr);
  control->Hold();
  controller.Request(600);
  control->WaitEntered();  // the thread is inside SetLockedClocks(600)
  controller.Request(800);
  controller.Request(1000);
  controller.Request(1200);
  control->Release();
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 0 600 600", "lock 0 1200 1200"}));
  EXPECT_EQ(controller.stats().coalesced, 2u);
  EXPECT_EQ(controller.stats().applied, 2u);
}

TEST(ClockControllerTest, PowerLimitsAndClocksAreOneLeverAtATime) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 1, nullptr);
  controller.RequestPowerLimit(250.0);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(controller.stats().last_power_limit_w, 250.0);
  controller.RequestPowerLimit(250.0);  // the limit in force: skipped
  ASSERT_TRUE(controller.WaitIdle(5));
  controller.Request(1200);  // a clock ends the power limit first
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(controller.stats().last_power_limit_w, 0.0);
  controller.RequestPowerLimit(200.0);  // and a limit ends the locked clock first
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(controller.stats().last_applied_mhz, 0);
  controller.RequestPowerLimit(0);  // no limit: back to defaults
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"power 1 250", "reset power 1", "lock 1 1200 1200", "reset 1",
                                     "power 1 200", "restore"}));
  const ControllerStats s = controller.stats();
  EXPECT_EQ(s.skipped, 1u);
  EXPECT_EQ(s.applied, 3u);
  EXPECT_EQ(s.restores, 1u);
}

TEST(ClockControllerTest, ARejectedPowerLimitRestoresAndReportsIt) {
  auto control = std::make_shared<FakeControl>();
  std::vector<std::string> reports;
  ClockController controller(control, 0, [&](const std::string& r) { reports.push_back(r); });
  control->FailPowerLimit();
  controller.RequestPowerLimit(90.5);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_TRUE(controller.failed());
  EXPECT_EQ(control->calls(), Calls({"fail power 90", "restore"}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("could not set GPU 0's power limit to 90.5"), std::string::npos)
      << reports[0];
  EXPECT_NE(reports[0].find("through fake: fake: power limit rejected"), std::string::npos)
      << reports[0];
}

TEST(ClockControllerTest, DestructorRestoresAPowerLimit) {
  auto control = std::make_shared<FakeControl>();
  {
    ClockController controller(control, 0, nullptr);
    controller.RequestPowerLimit(300);
    ASSERT_TRUE(controller.WaitIdle(5));
  }
  EXPECT_EQ(control->calls(), Calls({"power 0 300", "restore"}));
}

TEST(ClockControllerTest, FailureRestoresReportsOnceAndDropsLaterRequests) {
  auto control = std::make_shared<FakeControl>();
  control->FailAt(1410);
  std::vector<std::string> failures;
  ClockController controller(control, 0, [&](const std::string& why) { failures.push_back(why); });
  controller.Request(1000);
  ASSERT_TRUE(controller.WaitIdle(5));
  controller.Request(1410);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_TRUE(controller.failed());
  controller.Request(1200);  // dropped
  controller.Request(1410);  // dropped: no second failure
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 0 1000 1000", "fail 1410", "restore"}));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0],
            "could not lock GPU 0 at 1410 MHz through fake: fake: clock 1410 rejected");
  EXPECT_EQ(controller.stats().failed, 1u);
  EXPECT_EQ(controller.stats().last_applied_mhz, 0);

  controller.Clear();
  controller.Request(1200);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls().back(), "lock 0 1200 1200");
}

TEST(ClockControllerTest, DestructorRestoresOnlyWhenClocksWereChanged) {
  auto control = std::make_shared<FakeControl>();
  { ClockController controller(control, 0, nullptr); }
  EXPECT_TRUE(control->calls().empty());
  {
    ClockController controller(control, 0, nullptr);
    controller.Request(800);
    ASSERT_TRUE(controller.WaitIdle(5));
  }
  EXPECT_EQ(control->calls(), Calls({"lock 0 800 800", "restore"}));
}

TEST(ClockControllerTest, WakesFromDeepSleep) {
  auto control = std::make_shared<FakeControl>();
  ControllerOptions options;
  options.deep_sleep_after_s = 0;  // block on the condition variable at once
  ClockController controller(control, 0, nullptr, options);
  for (int i = 0; i < 200; ++i) {
    controller.Request(i % 2 == 0 ? 600 : 1200);
    ASSERT_TRUE(controller.WaitIdle(5));
  }
  EXPECT_EQ(controller.stats().applied, 200u);
  EXPECT_EQ(control->calls().back(), "lock 0 1200 1200");
}

TEST(ClockControllerTest, ManyRequestsFromAnotherThreadEndAtTheLatest) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 0, nullptr);
  for (int i = 0; i < 20000; ++i) controller.Request(i % 2 == 0 ? 600 : 1200);
  controller.Request(1000);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls().back(), "lock 0 1000 1000");
  const ControllerStats s = controller.stats();
  EXPECT_EQ(s.requested, 20001u);
  EXPECT_EQ(s.applied + s.skipped + s.coalesced, s.requested);
}

TEST(ClockControllerTest, RequestWaitRestoresWhenDue) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 1, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  controller.RequestWait(600, 1200, 0.05);
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 1 600 600"}));  // not yet restored
  while (controller.stats().timed_restores == 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 1 600 600", "lock 1 1200 1200"}));
  EXPECT_EQ(controller.stats().last_applied_mhz, 1200);
}

TEST(ClockControllerTest, ALaterRequestDisarmsTheTimedRestore) {
  auto control = std::make_shared<FakeControl>();
  ClockController controller(control, 0, nullptr);
  controller.RequestWait(600, 1200, 0.05);
  ASSERT_TRUE(controller.WaitIdle(5));
  controller.Request(1000);  // the next instruction began before the restore was due
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 0 600 600", "lock 0 1000 1000"}));
  EXPECT_EQ(controller.stats().timed_restores, 0u);
}

TEST(ClockControllerTest, ATimedRestoreIsNotLostToDeepSleep) {
  auto control = std::make_shared<FakeControl>();
  ControllerOptions options;
  options.deep_sleep_after_s = 0.01;  // would sleep long before the restore is due
  ClockController controller(control, 0, nullptr, options);
  controller.RequestWait(600, ClockController::kDefaultClocks, 0.1);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(controller.WaitIdle(5));
  EXPECT_EQ(control->calls(), Calls({"lock 0 600 600", "restore"}));
  EXPECT_EQ(controller.stats().timed_restores, 1u);
}

}  // namespace
}  // namespace joulepipe::runtime

// The in-process load extension (nvmlJoulepipeSimSetLoad,
// include/joulepipe/sim_nvml/ext.hpp): power, clock and energy follow
// what the caller says runs, exactly and cheaply at high change rates.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/sim_nvml/ext.hpp"
#include "sim_nvml_test_support.hpp"

namespace joulepipe::sim_nvml::testing {
namespace {

using SimNvmlLoadTest = SimNvmlTest;

const physics::GpuSpec& A100() {
  return physics::FindGpu("a100-sxm4-80gb");
}

sim_nvml::SimSetLoadFn SetLoad() {
  sim_nvml::SimSetLoadFn fn = nullptr;
  Lookup(Lib().handle, sim_nvml::kSimSetLoadSymbol, fn);
  return fn;
}

// Waits for the counter's next update and returns it with the update time.
unsigned long long NextTick(nvmlDevice_t device, double* at) {
  unsigned long long mj = 0;
  EXPECT_EQ(Lib().nvmlDeviceGetTotalEnergyConsumption(device, &mj), NVML_SUCCESS);
  for (;;) {
    unsigned long long now = 0;
    EXPECT_EQ(Lib().nvmlDeviceGetTotalEnergyConsumption(device, &now), NVML_SUCCESS);
    if (now != mj) {
      *at = NowUnixS();
      return now;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

TEST_F(SimNvmlLoadTest, PowerAndClockFollowTheLoadState) {
  const nvmlDevice_t device =
      InitWith({{"permissions", {{"clocks", true}}}, {"power_reading", "instant"}});
  const sim_nvml::SimSetLoadFn set_load = SetLoad();
  ASSERT_NE(set_load, nullptr);
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 1200, 1200), NVML_SUCCESS);

  ASSERT_EQ(set_load(device, sim_nvml::kLoadBusy, 0.8, 0.7), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 1200u);
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, physics::Power(A100(), 0.7, 1200), 0.002);

  ASSERT_EQ(set_load(device, sim_nvml::kLoadBlocked, 1, 1), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 1200u);
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, A100().p_block_w, 0.002);

  ASSERT_EQ(set_load(device, sim_nvml::kLoadIdle, 1, 1), NVML_SUCCESS);
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, A100().idle_w, 0.002);

  // Back to the (empty) schedule: idle.
  ASSERT_EQ(set_load(device, sim_nvml::kLoadSchedule, 1, 1), NVML_SUCCESS);
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, A100().idle_w, 0.002);

  EXPECT_EQ(set_load(device, 3, 1, 1), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(set_load(device, sim_nvml::kLoadBusy, 1.5, 1), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(set_load(device, sim_nvml::kLoadBusy, 0.5, -1), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(set_load(nullptr, sim_nvml::kLoadBusy, 0.5, 1), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlLoadTest, EnergyIsTheIntegralOfTheLoadExactlyAtHighChangeRates) {
  const nvmlDevice_t device = InitWith({{"permissions", {{"clocks", true}}}});
  const sim_nvml::SimSetLoadFn set_load = SetLoad();
  ASSERT_NE(set_load, nullptr);
  ASSERT_EQ(set_load(device, sim_nvml::kLoadBlocked, 1, 1), NVML_SUCCESS);
  double t0 = 0, t1 = 0;
  const unsigned long long e0 = NextTick(device, &t0);

  // ~0.5 s of 20,000 alternating busy/blocked changes, then 0.3 s blocked.
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500) ||
         calls < 20000) {
    ASSERT_EQ(set_load(device, calls % 2 ? sim_nvml::kLoadBlocked : sim_nvml::kLoadBusy, 1, 1),
              NVML_SUCCESS);
    ++calls;
    if (calls % 1000 == 0) Energy(device);  // readings in between stay cheap
  }
  ASSERT_EQ(set_load(device, sim_nvml::kLoadBlocked, 1, 1), NVML_SUCCESS);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const unsigned long long e1 = NextTick(device, &t1);
  // Bounds: every instant was blocked (p_block_w) or busy at 1410 MHz.
  const double span = std::round((t1 - t0) / 0.1) * 0.1;
  const double joules = (e1 - e0) / 1000.0;
  EXPECT_GE(joules, A100().p_block_w * span * 0.999);
  EXPECT_LE(
      joules,
      (A100().p_block_w * (span - seconds) + physics::Power(A100(), 1, 1410) * seconds) * 1.001);
  EXPECT_GT(calls / seconds, 10000) << "set-load calls must stay cheap";
}

// "wait": blocked power falls linearly with the locked clock to the value
// given at the lowest clock, and a locked-clock change takes effect after
// clock_switch_ms (what joulepipe calibrate-wait measures).
TEST_F(SimNvmlLoadTest, BlockedPowerFollowsTheClockAndClockChangesTakeTheirLatency) {
  const nvmlDevice_t device =
      InitWith({{"permissions", {{"clocks", true}}},
                {"power_reading", "instant"},
                {"wait", {{"blocked_w_at_min_clock", 60.0}, {"clock_switch_ms", 40}}}});
  const sim_nvml::SimSetLoadFn set_load = SetLoad();
  ASSERT_NE(set_load, nullptr);
  ASSERT_EQ(set_load(device, sim_nvml::kLoadBlocked, 1, 1), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 1410u);
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, A100().p_block_w, 0.002);

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 810, 810), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 1410u);  // not yet
  while (Clock(device) != 810u) std::this_thread::sleep_for(std::chrono::microseconds(200));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(took, 0.039);
  EXPECT_LT(took, 0.5);
  // 810 MHz is half way from 210 to 1410 MHz.
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, (60.0 + A100().p_block_w) / 2, 0.002);

  // Busy power does not depend on the wait model.
  ASSERT_EQ(set_load(device, sim_nvml::kLoadBusy, 0.8, 0.7), NVML_SUCCESS);
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, physics::Power(A100(), 0.7, 810), 0.002);
}

TEST_F(SimNvmlLoadTest, WithoutAWaitSectionBlockedPowerIgnoresTheClock) {
  const nvmlDevice_t device =
      InitWith({{"permissions", {{"clocks", true}}}, {"power_reading", "instant"}});
  ASSERT_EQ(SetLoad()(device, sim_nvml::kLoadBlocked, 1, 1), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 210, 210), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 210u);  // at once
  EXPECT_NEAR(InstantPowerMw(device) / 1000.0, A100().p_block_w, 0.002);
}

}  // namespace
}  // namespace joulepipe::sim_nvml::testing

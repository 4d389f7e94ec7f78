// Energy counter, power readings and clocks of the simulated library against
// the sim GPU model (include/joulepipe/physics/gpu_model.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "joulepipe/physics/gpu_model.hpp"
#include "sim_nvml_test_support.hpp"

namespace joulepipe::sim_nvml::testing {
namespace {

using nlohmann::json;

using SimNvmlEnergyTest = SimNvmlTest;

const physics::GpuSpec& A100() {
  return physics::FindGpu("a100-sxm4-80gb");
}

// The supported clock the library reports for a model clock: the highest
// supported one at or below it.
double GridDown(const physics::GpuSpec& gpu, double mhz) {
  for (int c : gpu.SupportedSmClocks())
    if (c <= mhz + 1e-9) return c;
  return gpu.min_sm_mhz;
}

// Busy power and clock of full-utilisation work under `limit_w`, with the
// highest clock `max_mhz`, as the library documents them.
struct Busy {
  double mhz, watts;
  bool capped;
};
Busy BusyAt(const physics::GpuSpec& gpu, double activity, double beta, double max_mhz, double limit_w) {
  const physics::OperatingPoint op = physics::Run(gpu, {1.0, beta, activity}, max_mhz, limit_w);
  const double mhz = op.power_capped ? GridDown(gpu, op.effective_mhz) : max_mhz;
  return {mhz, physics::Power(gpu, activity, mhz), op.power_capped};
}

double Tick(double t, double epoch, double period) {
  return epoch + std::floor((t - epoch) / period) * period;
}

TEST_F(SimNvmlEnergyTest, IdleCounterIsIdlePowerTimesElapsedQuantisedToThePeriod) {
  const double epoch = NowUnixS() - 20.0;
  const nvmlDevice_t device = InitWith({{"epoch_unix_s", epoch}});
  const double idle_w = A100().idle_w;
  const double before = NowUnixS();
  const unsigned long long mj = Energy(device);
  const double after = NowUnixS();
  // The counter holds the energy at the last 100 ms update tick.
  EXPECT_GE(mj + 1, std::floor(idle_w * (Tick(before, epoch, 0.1) - epoch) * 1000));
  EXPECT_LE(mj, std::ceil(idle_w * (Tick(after, epoch, 0.1) - epoch) * 1000));
  const double ticks = mj / (idle_w * 0.1 * 1000);
  EXPECT_NEAR(ticks, std::round(ticks), 1e-3) << "not on an update tick";

  unsigned power_mw = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerUsage(device, &power_mw), NVML_SUCCESS);
  EXPECT_NEAR(power_mw, idle_w * 1000, 1.0);
  EXPECT_EQ(Clock(device), static_cast<unsigned>(A100().min_sm_mhz));
  unsigned long long reasons = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCurrentClocksThrottleReasons(device, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, nvmlClocksThrottleReasonGpuIdle);
  nvmlUtilization_t util{7, 7};
  ASSERT_EQ(nvml().nvmlDeviceGetUtilizationRates(device, &util), NVML_SUCCESS);
  EXPECT_EQ(util.gpu, 0u);
  EXPECT_EQ(util.memory, 0u);
}

TEST_F(SimNvmlEnergyTest, CounterMovesOnlyAtUpdateTicks) {
  const double epoch = NowUnixS() - 1.0;
  const double period = 0.05;
  const nvmlDevice_t device = InitWith({{"epoch_unix_s", epoch}, {"energy_update_period_ms", 50}});
  const double step_mj = A100().idle_w * period * 1000;
  std::set<unsigned long long> values;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(220);
  while (std::chrono::steady_clock::now() < end) values.insert(Energy(device));
  ASSERT_GE(values.size(), 3u);
  ASSERT_LE(values.size(), 7u);
  for (auto it = std::next(values.begin()); it != values.end(); ++it) {
    const double steps = (*it - *std::prev(it)) / step_mj;
    EXPECT_NEAR(steps, std::round(steps), 1e-3);
    EXPECT_GE(std::round(steps), 1);
  }
}

TEST_F(SimNvmlEnergyTest, DefaultEpochIsBootTime) {
  const nvmlDevice_t device = InitWith(json::object());
  std::ifstream stat("/proc/stat");
  std::string word;
  double btime = 0;
  while (stat >> word)
    if (word == "btime" && (stat >> btime)) break;
  ASSERT_GT(btime, 0);
  const double expected = A100().idle_w * (NowUnixS() - btime) * 1000;
  EXPECT_NEAR(static_cast<double>(Energy(device)), expected, A100().idle_w * 1000 * 0.5);
}

TEST_F(SimNvmlEnergyTest, LoadSegmentChangesPowerClockAndEnergy) {
  const physics::GpuSpec& gpu = A100();
  const double epoch = NowUnixS() - 10.0;
  // Full compute load from 2 s to 6 s after the epoch, then again from 9 s on.
  const json load = {{{"start_s", 2}, {"end_s", 6}, {"compute_fraction", 0.5}},
                     {{"start_s", 9}, {"end_s", 1e6}, {"compute_fraction", 0.5}}};
  const nvmlDevice_t device = InitWith({{"epoch_unix_s", epoch}, {"load", load}});
  const Busy busy = BusyAt(gpu, 1.0, 0.5, gpu.max_sm_mhz, gpu.tdp_w);
  ASSERT_TRUE(busy.capped) << "activity-1 work is capped at the A100's 400 W default";

  EXPECT_EQ(Clock(device), static_cast<unsigned>(busy.mhz));
  EXPECT_NEAR(InstantPowerMw(device), busy.watts * 1000, 1.0);
  EXPECT_LE(busy.watts, gpu.tdp_w);
  unsigned long long reasons = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCurrentClocksThrottleReasons(device, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, nvmlClocksThrottleReasonSwPowerCap);
  nvmlUtilization_t util{};
  ASSERT_EQ(nvml().nvmlDeviceGetUtilizationRates(device, &util), NVML_SUCCESS);
  EXPECT_EQ(util.gpu, 100u);
  EXPECT_GT(util.memory, 0u);
  unsigned temp = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  EXPECT_GT(temp, 50u);
  EXPECT_LT(temp, 90u);

  // Piecewise integral: idle 0-2 s, busy 2-6 s, idle 6-9 s, busy 9 s - tick.
  auto expected = [&](double t) {
    const double tick = Tick(t, epoch, 0.1) - epoch;
    return (gpu.idle_w * 5 + busy.watts * 4 + busy.watts * (tick - 9)) * 1000;
  };
  const double before = NowUnixS();
  const double mj = static_cast<double>(Energy(device));
  const double after = NowUnixS();
  EXPECT_GE(mj + 1, std::floor(expected(before)));
  EXPECT_LE(mj, std::ceil(expected(after)));
}

TEST_F(SimNvmlEnergyTest, PartialUtilisationMixesBusyAndBlockedPower) {
  const physics::GpuSpec& gpu = A100();
  const json load = {{{"start_s", -1e6}, {"end_s", 1e6}, {"utilization", 0.25}, {"activity", 0.5}}};
  const nvmlDevice_t device = InitWith({{"load", load}, {"power_reading", "instant"}});
  const Busy busy = BusyAt(gpu, 0.5, 1.0, gpu.max_sm_mhz, gpu.tdp_w);
  const double expected_w = 0.25 * busy.watts + 0.75 * gpu.p_block_w;
  unsigned mw = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerUsage(device, &mw), NVML_SUCCESS);
  EXPECT_NEAR(mw, expected_w * 1000, 1.0);
  nvmlUtilization_t util{};
  ASSERT_EQ(nvml().nvmlDeviceGetUtilizationRates(device, &util), NVML_SUCCESS);
  EXPECT_EQ(util.gpu, 25u);
}

TEST_F(SimNvmlEnergyTest, PowerUsageIsTheOneSecondAverage) {
  const physics::GpuSpec& gpu = A100();
  const double now = NowUnixS();
  // Load until 0.5 s ago, idle since.
  const json load = {{{"start_s", -100}, {"end_s", -0.5}}};
  const nvmlDevice_t device = InitWith({{"epoch_unix_s", now}, {"load", load}});
  const Busy busy = BusyAt(gpu, 1.0, 1.0, gpu.max_sm_mhz, gpu.tdp_w);
  nvmlFieldValue_t fields[2]{};
  fields[0].fieldId = NVML_FI_DEV_POWER_AVERAGE;
  fields[1].fieldId = NVML_FI_DEV_POWER_INSTANT;
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(device, 2, fields), NVML_SUCCESS);
  // The epoch is now, so the 1 s window starts before it: the average falls
  // back to the instantaneous (idle) power.
  EXPECT_NEAR(fields[0].value.uiVal, gpu.idle_w * 1000, 1.0);
  EXPECT_NEAR(fields[1].value.uiVal, gpu.idle_w * 1000, 1.0);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);

  const double t0 = NowUnixS();
  const json load2 = {{{"start_s", 0}, {"end_s", 99.5}}};
  const nvmlDevice_t d2 = InitWith({{"epoch_unix_s", t0 - 100}, {"load", load2}});
  unsigned avg_mw = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerUsage(d2, &avg_mw), NVML_SUCCESS);
  const double late = NowUnixS() - t0;  // how long after t0 we read
  ASSERT_LT(late, 0.3);
  // Window [t-1, t] with the load ending at t0 - 0.5: busy for 0.5 - late s.
  const double lo = (busy.watts * (0.5 - late) + gpu.idle_w * (0.5 + late)) * 1000;
  const double hi = (busy.watts * 0.5 + gpu.idle_w * 0.5) * 1000;
  EXPECT_GE(avg_mw, lo - 1);
  EXPECT_LE(avg_mw, hi + 1);
  EXPECT_NEAR(InstantPowerMw(d2), gpu.idle_w * 1000, 1.0);
  nvmlFieldValue_t unknown{};
  unknown.fieldId = 1;
  ASSERT_EQ(nvml().nvmlDeviceGetFieldValues(d2, 1, &unknown), NVML_SUCCESS);
  EXPECT_EQ(unknown.nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(SimNvmlEnergyTest, LockedClocksAreHonouredAndTheCapLowersTheClock) {
  const physics::GpuSpec& gpu = A100();
  const json load = {{{"start_s", -1e6}, {"end_s", 1e6}}};
  const nvmlDevice_t device =
      InitWith({{"load", load},
                {"power_reading", "instant"},
                {"permissions", {{"clocks", true}, {"power_limit", true}}}});
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 1200), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 1200u);
  EXPECT_NEAR(InstantPowerMw(device), physics::Power(gpu, 1.0, 1200) * 1000, 1.0);
  unsigned long long reasons = 1;
  ASSERT_EQ(nvml().nvmlDeviceGetCurrentClocksThrottleReasons(device, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 0u);

  // A lock between supported clocks rounds down to one.
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 1000, 1007), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), static_cast<unsigned>(GridDown(gpu, 1007)));

  // A 150 W cap holds the clock well below the lock.
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 1410, 1410), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 150000), NVML_SUCCESS);
  const Busy capped = BusyAt(gpu, 1.0, 1.0, 1410, 150);
  ASSERT_TRUE(capped.capped);
  EXPECT_EQ(Clock(device), static_cast<unsigned>(capped.mhz));
  EXPECT_LT(capped.mhz, 1000);
  unsigned mw = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerUsage(device, &mw), NVML_SUCCESS);
  EXPECT_LE(mw, 150000u);
  EXPECT_NEAR(mw, capped.watts * 1000, 1.0);
  ASSERT_EQ(nvml().nvmlDeviceGetCurrentClocksThrottleReasons(device, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, nvmlClocksThrottleReasonSwPowerCap);
  unsigned limit = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetEnforcedPowerLimit(device, &limit), NVML_SUCCESS);
  EXPECT_EQ(limit, 150000u);

  // Reset: back to the max clock under the (raised) limit.
  ASSERT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 500000), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceResetGpuLockedClocks(device), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), static_cast<unsigned>(BusyAt(gpu, 1.0, 1.0, 1410, 500).mhz));
}

TEST_F(SimNvmlEnergyTest, IdleClockFollowsTheLockedMinimum) {
  const nvmlDevice_t device = InitWith({{"permissions", {{"clocks", true}}}});
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 1200), NVML_SUCCESS);
  EXPECT_EQ(Clock(device), 900u);
  EXPECT_NEAR(InstantPowerMw(device), A100().idle_w * 1000, 1.0);
}

TEST_F(SimNvmlEnergyTest, EnergyIntegratesSettingChanges) {
  const physics::GpuSpec& gpu = A100();
  const double epoch = NowUnixS() - 3.0;
  const json load = {{{"start_s", 0}, {"end_s", 1e6}}};
  const nvmlDevice_t device = InitWith({{"epoch_unix_s", epoch},
                                        {"load", load},
                                        {"call_log", Path("calls.jsonl")},
                                        {"permissions", {{"clocks", true}}}});
  const double t_set = NowUnixS();
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 900), NVML_SUCCESS);
  const double t_set_after = NowUnixS();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const double before = NowUnixS();
  const double mj = static_cast<double>(Energy(device));
  const double after = NowUnixS();
  const double p_before = BusyAt(gpu, 1.0, 1.0, 1410, gpu.tdp_w).watts;
  const double p_after = physics::Power(gpu, 1.0, 900);
  auto expected = [&](double t, double tc) {
    return (p_before * (tc - epoch) + p_after * (Tick(t, epoch, 0.1) - tc)) * 1000;
  };
  // The change happened between t_set and t_set_after; the earlier it
  // happened the less energy (p_after < p_before).
  EXPECT_GE(mj + 1, std::floor(expected(before, t_set)));
  EXPECT_LE(mj, std::ceil(expected(after, t_set_after)));
}

TEST_F(SimNvmlEnergyTest, ConcurrentReadersAndSetters) {
  const nvmlDevice_t device = InitWith(
      {{"state_file", Path("state.json")}, {"count", 2}, {"permissions", {{"clocks", true}}}});
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        unsigned long long mj = 0;
        unsigned mw = 0;
        if (nvml().nvmlDeviceGetTotalEnergyConsumption(device, &mj) != NVML_SUCCESS) ++failures;
        if (nvml().nvmlDeviceGetPowerUsage(device, &mw) != NVML_SUCCESS) ++failures;
        if (t == 0 &&
            nvml().nvmlDeviceSetGpuLockedClocks(device, 210 + 15 * (i % 40), 1410) != NVML_SUCCESS)
          ++failures;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace joulepipe::sim_nvml::testing

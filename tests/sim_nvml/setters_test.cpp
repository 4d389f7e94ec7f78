// Setters, permissions, the call log, injected faults and the state shared
// between processes through the state file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "joulepipe/physics/gpu_model.hpp"
#include "sim_nvml_test_support.hpp"

namespace joulepipe::sim_nvml::testing {
namespace {

using nlohmann::json;

using SimNvmlSetterTest = SimNvmlTest;

const physics::GpuSpec& A100() {
  return physics::FindGpu("a100-sxm4-80gb");
}

TEST_F(SimNvmlSetterTest, SettersNeedPermission) {
  const nvmlDevice_t device = InitWith(json::object());
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 1200), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml().nvmlDeviceResetGpuLockedClocks(device), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 300000), NVML_ERROR_NO_PERMISSION);
  unsigned limit = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerManagementLimit(device, &limit), NVML_SUCCESS);
  EXPECT_EQ(limit, 400000u);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);

  // Permission for clocks does not grant the power limit, and vice versa.
  const nvmlDevice_t d2 = InitWith({{"permissions", {{"clocks", true}}}});
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(d2, 900, 1200), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceResetGpuLockedClocks(d2), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(d2, 300000), NVML_ERROR_NO_PERMISSION);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  const nvmlDevice_t d3 = InitWith({{"permissions", {{"power_limit", true}}}});
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(d3, 900, 1200), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(d3, 300000), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceGetPowerManagementLimit(d3, &limit), NVML_SUCCESS);
  EXPECT_EQ(limit, 300000u);
}

TEST_F(SimNvmlSetterTest, SettersValidateTheirArguments) {
  const nvmlDevice_t device =
      InitWith({{"permissions", {{"clocks", true}, {"power_limit", true}}}});
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 1200, 900), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 99999), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 500001), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 100000), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 500000), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(nullptr, 300000), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlSetterTest, EverySetterCallIsLogged) {
  const std::string log = Path("calls.jsonl");
  const nvmlDevice_t device =
      InitWith({{"count", 2}, {"call_log", log}, {"permissions", {{"clocks", true}}}});
  nvmlDevice_t second = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &second), NVML_SUCCESS);
  const double t0 = NowUnixS();
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 1200), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(second, 1200, 900), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml().nvmlDeviceSetPowerManagementLimit(device, 300000), NVML_ERROR_NO_PERMISSION);
  ASSERT_EQ(nvml().nvmlDeviceResetGpuLockedClocks(device), NVML_SUCCESS);
  unsigned mw = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerUsage(device, &mw), NVML_SUCCESS);  // not a setter

  const std::vector<json> lines = ReadJsonLines(log);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["function"], "nvmlDeviceSetGpuLockedClocks");
  EXPECT_EQ(lines[0]["device"], 0);
  EXPECT_EQ(lines[0]["args"], json({{"min_mhz", 900}, {"max_mhz", 1200}}));
  EXPECT_EQ(lines[0]["result"], 0);
  EXPECT_EQ(lines[0]["result_name"], "NVML_SUCCESS");
  EXPECT_EQ(lines[0]["pid"], static_cast<long>(getpid()));
  EXPECT_GE(lines[0]["t"].get<double>(), t0);
  EXPECT_EQ(lines[1]["device"], 1);
  EXPECT_EQ(lines[1]["result_name"], "NVML_ERROR_INVALID_ARGUMENT");
  EXPECT_EQ(lines[2]["function"], "nvmlDeviceSetPowerManagementLimit");
  EXPECT_EQ(lines[2]["args"], json({{"limit_mw", 300000}}));
  EXPECT_EQ(lines[2]["result"], static_cast<int>(NVML_ERROR_NO_PERMISSION));
  EXPECT_EQ(lines[3]["function"], "nvmlDeviceResetGpuLockedClocks");
  EXPECT_TRUE(lines[3]["uuid"].is_string());
}

TEST_F(SimNvmlSetterTest, GpuLostFromAConfiguredTime) {
  const double epoch = NowUnixS() - 10.0;
  const json config = {
      {"epoch_unix_s", epoch},
      {"devices", {{{"faults", {{"gpu_lost_at_s", 5}}}}, {{"faults", {{"gpu_lost_at_s", 1e6}}}}}}};
  const nvmlDevice_t lost = InitWith(config, 0);
  nvmlDevice_t fine = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &fine), NVML_SUCCESS);
  char name[96];
  unsigned long long mj = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetName(lost, name, sizeof name), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(lost, &mj), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(lost, 900, 900), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml().nvmlDeviceGetName(fine, name, sizeof name), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(fine, &mj), NVML_SUCCESS);
}

TEST_F(SimNvmlSetterTest, UnknownErrorOnNamedFunctions) {
  const nvmlDevice_t device =
      InitWith({{"faults", {{"unknown_error", {"nvmlDeviceGetPowerUsage"}}}}});
  unsigned mw = 0;
  unsigned long long mj = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetPowerUsage(device, &mw), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(device, &mj), NVML_SUCCESS);
}

TEST_F(SimNvmlSetterTest, EnergyCounterNotSupportedAsBeforeVolta) {
  const nvmlDevice_t device = InitWith({{"faults", {{"energy_counter_not_supported", true}}}});
  unsigned long long mj = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(device, &mj), NVML_ERROR_NOT_SUPPORTED);
  unsigned mw = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetPowerUsage(device, &mw), NVML_SUCCESS);
}

TEST_F(SimNvmlSetterTest, DriverNotLoaded) {
  UseConfig({{"init_error", "driver_not_loaded"}});
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(nvml().nvmlInitWithFlags(0), NVML_ERROR_DRIVER_NOT_LOADED);
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlSetterTest, SettingsAreSharedAcrossProcessesThroughTheStateFile) {
  const physics::GpuSpec& gpu = A100();
  const double epoch = NowUnixS() - 5.0;
  const std::string state = Path("state.json");
  const json config = {{"epoch_unix_s", epoch},
                       {"load", {{{"start_s", 0}, {"end_s", 1e6}}}},
                       {"state_file", state},
                       {"permissions", {{"clocks", true}}}};
  const nvmlDevice_t device = InitWith(config);
  const unsigned unlocked = Clock(device);
  ASSERT_GT(unlocked, 1200u);

  // Another process locks the clock ...
  EXPECT_EQ(InChild([&] {
              nvmlDevice_t d = nullptr;
              if (nvml().nvmlInit_v2() != NVML_SUCCESS) return 1;
              if (nvml().nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 2;
              return nvml().nvmlDeviceSetGpuLockedClocks(d, 1200, 1200) == NVML_SUCCESS ? 0 : 3;
            }),
            0);
  // ... and this one sees it, in the clock and in the energy.
  EXPECT_EQ(Clock(device), 1200u);
  std::ifstream in(state);
  const json saved = json::parse(in);
  const json& changes = saved["devices"].begin().value()["changes"];
  ASSERT_EQ(changes.size(), 1u);
  const double tc = changes[0]["t"].get<double>();
  const double p1 = physics::Power(gpu, 1.0, unlocked), p2 = physics::Power(gpu, 1.0, 1200);
  auto expected = [&](double t) {
    // The counter holds the integral up to the last tick, which may precede
    // the change.
    const double tick = epoch + std::floor((t - epoch) / 0.1) * 0.1;
    if (tick <= tc) return p1 * (tick - epoch) * 1000;
    return (p1 * (tc - epoch) + p2 * (tick - tc)) * 1000;
  };
  const double before = NowUnixS();
  const double mj = static_cast<double>(Energy(device));
  const double after = NowUnixS();
  EXPECT_GE(mj + 1, std::floor(expected(before)));
  EXPECT_LE(mj, std::ceil(expected(after)));

  // A third process reads the same counter (same function of time).
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const double child_before = NowUnixS();
  EXPECT_EQ(InChild([&] {
              close(fds[0]);
              nvmlDevice_t d = nullptr;
              unsigned long long value = 0;
              if (nvml().nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 1;
              if (nvml().nvmlDeviceGetTotalEnergyConsumption(d, &value) != NVML_SUCCESS) return 2;
              return write(fds[1], &value, sizeof value) == sizeof value ? 0 : 3;
            }),
            0);
  const double child_after = NowUnixS();
  close(fds[1]);
  unsigned long long child_mj = 0;
  ASSERT_EQ(read(fds[0], &child_mj, sizeof child_mj), static_cast<ssize_t>(sizeof child_mj));
  close(fds[0]);
  EXPECT_GE(static_cast<double>(child_mj) + 1, std::floor(expected(child_before)));
  EXPECT_LE(static_cast<double>(child_mj), std::ceil(expected(child_after)));
  EXPECT_GE(Energy(device), child_mj);
}

TEST_F(SimNvmlSetterTest, WithoutAStateFileSettingsArePerProcess) {
  const nvmlDevice_t device = InitWith({{"permissions", {{"clocks", true}}}});
  EXPECT_EQ(InChild([&] {
              nvmlDevice_t d = nullptr;
              if (nvml().nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 1;
              return nvml().nvmlDeviceSetGpuLockedClocks(d, 900, 900) == NVML_SUCCESS ? 0 : 2;
            }),
            0);
  EXPECT_EQ(Clock(device), static_cast<unsigned>(A100().min_sm_mhz));  // idle, unlocked
}

TEST_F(SimNvmlSetterTest, LongHistoriesAreFoldedWithoutChangingTheEnergy) {
  const physics::GpuSpec& gpu = A100();
  const std::string state = Path("state.json");
  const double epoch = NowUnixS() - 2.0;
  const nvmlDevice_t device = InitWith({{"epoch_unix_s", epoch},
                                        {"energy_update_period_ms", 10},
                                        {"load", {{{"start_s", 0}, {"end_s", 1e6}}}},
                                        {"state_file", state},
                                        {"permissions", {{"clocks", true}}}});
  auto changes = [&] {
    std::ifstream in(state);
    return json::parse(in)["devices"].begin().value()["changes"].size();
  };
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 1200 + 15 * (i % 2)), NVML_SUCCESS);
  // Changes younger than the folding horizon (2 s + one period) are kept.
  EXPECT_EQ(changes(), 100u);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  // The last change (i = 99) locked 1215 MHz.
  const double t1 = NowUnixS();
  const unsigned long long before = Energy(device);
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 1200), NVML_SUCCESS);
  EXPECT_LE(changes(), 64u);
  const unsigned long long after = Energy(device);
  const double t2 = NowUnixS();
  // Between the two reads the GPU ran at 1215 then 1200 MHz: the folded
  // base kept the energy, so the counter advanced by that power only.
  const double step = static_cast<double>(after) - static_cast<double>(before);
  EXPECT_GE(step, -1.0);
  EXPECT_LE(step, physics::Power(gpu, 1.0, 1215) * (t2 - t1 + 0.01) * 1000 + 1);
}

}  // namespace
}  // namespace joulepipe::sim_nvml::testing

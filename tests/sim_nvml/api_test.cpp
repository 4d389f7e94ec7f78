// The simulated NVML library as any client sees it: sessions, enumeration,
// identity, buffers, error strings, configuration and environment overrides.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <string>

#include "joulepipe/physics/gpu_model.hpp"
#include "sim_nvml_test_support.hpp"

namespace joulepipe::sim_nvml::testing {
namespace {

using nlohmann::json;

using SimNvmlApiTest = SimNvmlTest;

TEST_F(SimNvmlApiTest, EveryCallBeforeInitIsUninitialized) {
  UseConfig(json::object());
  unsigned count = 0;
  nvmlDevice_t device = nullptr;
  char buf[96];
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(0, &device), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
  // A handle kept from an earlier session is refused too.
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(0, &device), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetName(device, buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device, 900, 900), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlApiTest, InitIsReferenceCounted) {
  UseConfig(json::object());
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlInitWithFlags(0), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlApiTest, DefaultIsOneA100Sxm4With80Gb) {
  // No config at all: the documented default.
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 1u);
  nvmlDevice_t device = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(0, &device), NVML_SUCCESS);
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  ASSERT_EQ(nvml().nvmlDeviceGetName(device, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "NVIDIA A100-SXM4-80GB");
  nvmlDeviceArchitecture_t arch = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetArchitecture(device, &arch), NVML_SUCCESS);
  EXPECT_EQ(arch, static_cast<unsigned>(NVML_DEVICE_ARCH_AMPERE));
  EXPECT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &device), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlApiTest, SystemVersions) {
  InitWith({{"driver_version", "535.104.05"}, {"cuda_driver_version", 12020}});
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  ASSERT_EQ(nvml().nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "535.104.05");
  ASSERT_EQ(nvml().nvmlSystemGetNVMLVersion(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "12.535.104.05");
  int cuda = 0;
  ASSERT_EQ(nvml().nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 12020);
  ASSERT_EQ(nvml().nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 12020);
  EXPECT_EQ(nvml().nvmlSystemGetDriverVersion(buf, 5), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml().nvmlSystemGetCudaDriverVersion(nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvmlApiTest, DevicesHaveStableDistinctUuidsAndHandles) {
  InitWith({{"gpu", "h100-sxm"}, {"count", 4}});
  std::set<std::string> uuids;
  std::vector<nvmlDevice_t> handles;
  for (unsigned i = 0; i < 4; ++i) {
    nvmlDevice_t device = nullptr;
    ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(i, &device), NVML_SUCCESS);
    handles.push_back(device);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ASSERT_EQ(nvml().nvmlDeviceGetUUID(device, uuid, sizeof uuid), NVML_SUCCESS);
    EXPECT_EQ(std::string(uuid).substr(0, 4), "GPU-");
    EXPECT_EQ(std::strlen(uuid), 40u) << uuid;
    uuids.insert(uuid);
    nvmlDevice_t by_uuid = nullptr;
    ASSERT_EQ(nvml().nvmlDeviceGetHandleByUUID(uuid, &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, device);
    unsigned index = 99;
    ASSERT_EQ(nvml().nvmlDeviceGetIndex(device, &index), NVML_SUCCESS);
    EXPECT_EQ(index, i);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    ASSERT_EQ(nvml().nvmlDeviceGetName(device, name, sizeof name), NVML_SUCCESS);
    EXPECT_EQ(std::string(name), physics::FindGpu("h100-sxm").name);
  }
  EXPECT_EQ(uuids.size(), 4u);
  nvmlDevice_t none = nullptr;
  EXPECT_EQ(nvml().nvmlDeviceGetHandleByUUID("GPU-nope", &none), NVML_ERROR_NOT_FOUND);

  // A new session with the same config: same UUIDs, same handles.
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  for (unsigned i = 0; i < 4; ++i) {
    nvmlDevice_t device = nullptr;
    ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(i, &device), NVML_SUCCESS);
    EXPECT_EQ(device, handles[i]);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ASSERT_EQ(nvml().nvmlDeviceGetUUID(device, uuid, sizeof uuid), NVML_SUCCESS);
    EXPECT_TRUE(uuids.count(uuid));
  }
}

TEST_F(SimNvmlApiTest, ConfiguredUuidsAndPerDeviceTypes) {
  const json config = {{"devices",
                        {{{"gpu", "a40"}, {"uuid", "GPU-11111111-2222-3333-4444-555555555555"}},
                         {{"gpu", "v100-sxm2"}}}}};
  const nvmlDevice_t a40 = InitWith(config, 0);
  nvmlDevice_t v100 = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &v100), NVML_SUCCESS);
  char buf[96];
  ASSERT_EQ(nvml().nvmlDeviceGetUUID(a40, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "GPU-11111111-2222-3333-4444-555555555555");
  ASSERT_EQ(nvml().nvmlDeviceGetName(a40, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(std::string(buf), physics::FindGpu("a40").name);
  nvmlDeviceArchitecture_t arch = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetArchitecture(v100, &arch), NVML_SUCCESS);
  EXPECT_EQ(arch, static_cast<unsigned>(NVML_DEVICE_ARCH_VOLTA));
}

TEST_F(SimNvmlApiTest, EnvironmentOverridesTypeAndCount) {
  UseConfig({{"gpu", "a40"}, {"count", 2}});
  setenv("JOULEPIPE_SIM_NVML_GPU", "h200-sxm", 1);
  setenv("JOULEPIPE_SIM_NVML_COUNT", "3", 1);
  ASSERT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
  unsetenv("JOULEPIPE_SIM_NVML_GPU");
  unsetenv("JOULEPIPE_SIM_NVML_COUNT");
  unsigned count = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 3u);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(i, &device), NVML_SUCCESS);
    char name[96];
    ASSERT_EQ(nvml().nvmlDeviceGetName(device, name, sizeof name), NVML_SUCCESS);
    EXPECT_EQ(std::string(name), physics::FindGpu("h200-sxm").name);
  }
}

TEST_F(SimNvmlApiTest, InvalidConfigFailsInit) {
  UseConfig({{"gpu", "no-such-gpu"}});
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  UseConfig({{"cuont", 2}});  // typo: unknown fields are errors
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  UseConfig({{"wait", {{"blocked_w_at_min_clock", 500.0}}}});  // above p_block_w
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  UseConfig({{"wait", {{"clock_switch_ms", -1}}}});
  EXPECT_EQ(nvml().nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvmlApiTest, MigModeAsConfigured) {
  const json config = {{"devices", {{{"mig", true}}, json::object(), {{"gpu", "a40"}}}}};
  const nvmlDevice_t mig = InitWith(config, 0);
  nvmlDevice_t plain = nullptr, a40 = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &plain), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(2, &a40), NVML_SUCCESS);
  unsigned current = 9, pending = 9;
  ASSERT_EQ(nvml().nvmlDeviceGetMigMode(mig, &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, static_cast<unsigned>(NVML_DEVICE_MIG_ENABLE));
  EXPECT_EQ(pending, static_cast<unsigned>(NVML_DEVICE_MIG_ENABLE));
  ASSERT_EQ(nvml().nvmlDeviceGetMigMode(plain, &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, static_cast<unsigned>(NVML_DEVICE_MIG_DISABLE));
  EXPECT_EQ(nvml().nvmlDeviceGetMigMode(a40, &current, &pending), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(SimNvmlApiTest, NullPointersAndSmallBuffers) {
  const nvmlDevice_t device = InitWith(json::object());
  char small[4];
  EXPECT_EQ(nvml().nvmlDeviceGetName(device, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml().nvmlDeviceGetUUID(device, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml().nvmlDeviceGetName(device, nullptr, 96), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetName(nullptr, small, sizeof small), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetCount_v2(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(device, nullptr),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetPowerUsage(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(device, 0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  int not_a_handle = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetIndex(reinterpret_cast<nvmlDevice_t>(&not_a_handle), nullptr),
            NVML_ERROR_INVALID_ARGUMENT);

  // Count/array pairs: asking with too small an array returns the count.
  const physics::GpuSpec& gpu = physics::FindGpu("a100-sxm4-80gb");
  unsigned count = 0;
  EXPECT_EQ(nvml().nvmlDeviceGetSupportedGraphicsClocks(device, gpu.memory_mhz, &count, nullptr),
            NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(count, gpu.SupportedSmClocks().size());
  std::vector<unsigned> clocks(count);
  ASSERT_EQ(
      nvml().nvmlDeviceGetSupportedGraphicsClocks(device, gpu.memory_mhz, &count, clocks.data()),
      NVML_SUCCESS);
  EXPECT_EQ(clocks.front(), static_cast<unsigned>(gpu.max_sm_mhz));
  EXPECT_EQ(clocks.back(), static_cast<unsigned>(gpu.min_sm_mhz));
  EXPECT_EQ(nvml().nvmlDeviceGetSupportedGraphicsClocks(device, 1, &count, clocks.data()),
            NVML_ERROR_NOT_FOUND);
  unsigned mem = 0;
  count = 1;
  ASSERT_EQ(nvml().nvmlDeviceGetSupportedMemoryClocks(device, &count, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem, static_cast<unsigned>(gpu.memory_mhz));
}

TEST_F(SimNvmlApiTest, ErrorStringsForEveryCode) {
  // Works without a session, as NVML's does.
  std::set<std::string> seen;
  for (int code : {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                   15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 999}) {
    const char* s = nvml().nvmlErrorString(static_cast<nvmlReturn_t>(code));
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(std::strlen(s), 0u) << code;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 29u);
  EXPECT_NE(nvml().nvmlErrorString(static_cast<nvmlReturn_t>(12345)), nullptr);
}

TEST_F(SimNvmlApiTest, PowerLimitsInMilliwatts) {
  const nvmlDevice_t device = InitWith({{"gpu", "a100-sxm4-80gb"}});
  const physics::GpuSpec& gpu = physics::FindGpu("a100-sxm4-80gb");
  unsigned lo = 0, hi = 0, def = 0, cur = 0, enforced = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetPowerManagementLimitConstraints(device, &lo, &hi), NVML_SUCCESS);
  EXPECT_EQ(lo, static_cast<unsigned>(gpu.power_limit_min_w * 1000));
  EXPECT_EQ(hi, static_cast<unsigned>(gpu.power_limit_max_w * 1000));
  ASSERT_EQ(nvml().nvmlDeviceGetPowerManagementDefaultLimit(device, &def), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceGetPowerManagementLimit(device, &cur), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlDeviceGetEnforcedPowerLimit(device, &enforced), NVML_SUCCESS);
  EXPECT_EQ(def, static_cast<unsigned>(gpu.tdp_w * 1000));
  EXPECT_EQ(cur, def);
  EXPECT_EQ(enforced, def);
  unsigned max_clock = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetMaxClockInfo(device, NVML_CLOCK_SM, &max_clock), NVML_SUCCESS);
  EXPECT_EQ(max_clock, static_cast<unsigned>(gpu.max_sm_mhz));
  ASSERT_EQ(nvml().nvmlDeviceGetMaxClockInfo(device, NVML_CLOCK_MEM, &max_clock), NVML_SUCCESS);
  EXPECT_EQ(max_clock, static_cast<unsigned>(gpu.memory_mhz));
}

}  // namespace
}  // namespace joulepipe::sim_nvml::testing

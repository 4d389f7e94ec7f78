// The NVML calls Zeus's GPU layer makes beyond our ABI (docs/sim-nvml.md,
// "Zeus"): memory locked clocks, the versioned temperature, persistence mode,
// the C2C mode probe and power field values by scope. Struct layouts and
// version tags are written here as pynvml declares them, independently of the
// library's own header, so a layout mismatch fails here as it would in pynvml.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string>

#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/sim_nvml/ext.hpp"
#include "sim_nvml_test_support.hpp"

namespace joulepipe::sim_nvml::testing {
namespace {

using nlohmann::json;

// pynvml: c_nvmlTemperature_v1_t, nvmlTemperature_v1 = 0x100000C.
struct TemperatureV1 {
  unsigned version;
  int sensor_type;
  int temperature;
};
constexpr unsigned kTemperatureV1 = 0x100000C;
static_assert((sizeof(TemperatureV1) | (1u << 24)) == kTemperatureV1);

// pynvml: c_nvmlC2cModeInfo_v1_t (no version field).
struct C2cModeInfoV1 {
  unsigned is_c2c_enabled;
};

// pynvml: NVML_POWER_SCOPE_*.
constexpr unsigned kScopeGpu = 0, kScopeModule = 1, kScopeMemory = 2;

struct ZeusCalls {
  nvmlReturn_t (*set_memory_locked_clocks)(nvmlDevice_t, unsigned, unsigned) = nullptr;
  nvmlReturn_t (*reset_memory_locked_clocks)(nvmlDevice_t) = nullptr;
  nvmlReturn_t (*get_temperature_v)(nvmlDevice_t, TemperatureV1*) = nullptr;
  nvmlReturn_t (*get_persistence_mode)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*set_persistence_mode)(nvmlDevice_t, unsigned) = nullptr;
  nvmlReturn_t (*get_c2c_mode_info_v)(nvmlDevice_t, C2cModeInfoV1*) = nullptr;
  SimSetLoadFn set_load = nullptr;
};

const ZeusCalls& Zeus() {
  static ZeusCalls z = [] {
    ZeusCalls z;
    void* lib = Lib().handle;
    if (lib == nullptr) return z;
    Lookup(lib, "nvmlDeviceSetMemoryLockedClocks", z.set_memory_locked_clocks);
    Lookup(lib, "nvmlDeviceResetMemoryLockedClocks", z.reset_memory_locked_clocks);
    Lookup(lib, "nvmlDeviceGetTemperatureV", z.get_temperature_v);
    Lookup(lib, "nvmlDeviceGetPersistenceMode", z.get_persistence_mode);
    Lookup(lib, "nvmlDeviceSetPersistenceMode", z.set_persistence_mode);
    Lookup(lib, "nvmlDeviceGetC2cModeInfoV", z.get_c2c_mode_info_v);
    Lookup(lib, kSimSetLoadSymbol, z.set_load);
    return z;
  }();
  return z;
}

class SimNvmlZeusTest : public SimNvmlTest {
 protected:
  void SetUp() override {
    SimNvmlTest::SetUp();
    ASSERT_NE(Zeus().set_memory_locked_clocks, nullptr);
    ASSERT_NE(Zeus().reset_memory_locked_clocks, nullptr);
    ASSERT_NE(Zeus().get_temperature_v, nullptr);
    ASSERT_NE(Zeus().get_persistence_mode, nullptr);
    ASSERT_NE(Zeus().set_persistence_mode, nullptr);
    ASSERT_NE(Zeus().get_c2c_mode_info_v, nullptr);
    ASSERT_NE(Zeus().set_load, nullptr);
  }

  unsigned MemoryClock(nvmlDevice_t device) const {
    unsigned mhz = 0;
    EXPECT_EQ(nvml().nvmlDeviceGetClockInfo(device, NVML_CLOCK_MEM, &mhz), NVML_SUCCESS);
    return mhz;
  }

  unsigned PersistenceMode(nvmlDevice_t device) const {
    unsigned mode = 99;
    EXPECT_EQ(Zeus().get_persistence_mode(device, &mode), NVML_SUCCESS);
    return mode;
  }

  // One power field for one scope: its nvmlReturn and value (mW).
  std::pair<nvmlReturn_t, unsigned> PowerField(nvmlDevice_t device, unsigned field,
                                               unsigned scope) const {
    nvmlFieldValue_t value{};
    value.fieldId = field;
    value.scopeId = scope;
    EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(device, 1, &value), NVML_SUCCESS);
    return {value.nvmlReturn, value.value.uiVal};
  }
};

unsigned Mw(double watts) {
  return static_cast<unsigned>(std::lround(watts * 1000.0));
}

// ---- Memory locked clocks -------------------------------------------------------

TEST_F(SimNvmlZeusTest, MemoryLockedClocksNeedTheClockPermission) {
  const nvmlDevice_t device = InitWith({{"permissions", {{"power_limit", true}}}});
  EXPECT_EQ(Zeus().set_memory_locked_clocks(device, 1593, 1593), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(Zeus().reset_memory_locked_clocks(device), NVML_ERROR_NO_PERMISSION);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);

  const nvmlDevice_t allowed = InitWith({{"permissions", {{"clocks", true}}}});
  EXPECT_EQ(Zeus().set_memory_locked_clocks(allowed, 1593, 1593), NVML_SUCCESS);
  EXPECT_EQ(Zeus().reset_memory_locked_clocks(allowed), NVML_SUCCESS);
}

TEST_F(SimNvmlZeusTest, MemoryLockedClocksAreClampedToTheSupportedClock) {
  // A100 and H100 list one memory clock: any valid range locks to it.
  for (const char* gpu : {"a100-sxm4-80gb", "h100-sxm"}) {
    SCOPED_TRACE(gpu);
    const nvmlDevice_t device = InitWith({{"gpu", gpu}, {"permissions", {{"clocks", true}}}});
    const unsigned mem = static_cast<unsigned>(physics::FindGpu(gpu).memory_mhz);
    unsigned max = 0;
    ASSERT_EQ(nvml().nvmlDeviceGetMaxClockInfo(device, NVML_CLOCK_MEM, &max), NVML_SUCCESS);
    EXPECT_EQ(max, mem);
    EXPECT_EQ(MemoryClock(device), mem);
    const std::pair<unsigned, unsigned> ranges[] = {
        {mem, mem}, {0, 100}, {100, 100000}, {mem + 1, mem + 500}};
    for (auto [lo, hi] : ranges) {
      EXPECT_EQ(Zeus().set_memory_locked_clocks(device, lo, hi), NVML_SUCCESS) << lo << "-" << hi;
      EXPECT_EQ(MemoryClock(device), mem) << lo << "-" << hi;
    }
    EXPECT_EQ(Zeus().set_memory_locked_clocks(device, mem + 1, mem), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Zeus().reset_memory_locked_clocks(device), NVML_SUCCESS);
    EXPECT_EQ(MemoryClock(device), mem);
    // The graphics clocks are queried for that memory clock, as Zeus does.
    unsigned count = 0;
    EXPECT_EQ(nvml().nvmlDeviceGetSupportedGraphicsClocks(device, mem, &count, nullptr),
              NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_GT(count, 10u);
    EXPECT_EQ(nvml().nvmlDeviceGetSupportedGraphicsClocks(device, mem - 1, &count, nullptr),
              NVML_ERROR_NOT_FOUND);
    ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  }
}

TEST_F(SimNvmlZeusTest, MemoryLockedClocksAreNotSupportedBeforeAmpere) {
  // Checked before the permission: a capability of the device, not the user.
  const nvmlDevice_t device = InitWith({{"gpu", "v100-sxm2"}});
  EXPECT_EQ(Zeus().set_memory_locked_clocks(device, 877, 877), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(Zeus().reset_memory_locked_clocks(device), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  const nvmlDevice_t a40 = InitWith({{"gpu", "a40"}, {"permissions", {{"clocks", true}}}});
  EXPECT_EQ(Zeus().set_memory_locked_clocks(a40, 0, 100000), NVML_SUCCESS);
}

TEST_F(SimNvmlZeusTest, MemoryLockedClocksAreLoggedLikeTheOtherSetters) {
  const std::string log = Path("calls.jsonl");
  const nvmlDevice_t device =
      InitWith({{"count", 2}, {"call_log", log}, {"permissions", {{"clocks", true}}}});
  nvmlDevice_t second = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &second), NVML_SUCCESS);
  ASSERT_EQ(Zeus().set_memory_locked_clocks(second, 1593, 1593), NVML_SUCCESS);
  ASSERT_EQ(Zeus().set_memory_locked_clocks(device, 1600, 1500), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(Zeus().reset_memory_locked_clocks(second), NVML_SUCCESS);
  ASSERT_EQ(Zeus().reset_memory_locked_clocks(nullptr), NVML_ERROR_INVALID_ARGUMENT);

  const std::vector<json> lines = ReadJsonLines(log);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["function"], "nvmlDeviceSetMemoryLockedClocks");
  EXPECT_EQ(lines[0]["device"], 1);
  EXPECT_EQ(lines[0]["args"], json({{"min_mhz", 1593}, {"max_mhz", 1593}}));
  EXPECT_EQ(lines[0]["result_name"], "NVML_SUCCESS");
  EXPECT_EQ(lines[1]["device"], 0);
  EXPECT_EQ(lines[1]["args"], json({{"min_mhz", 1600}, {"max_mhz", 1500}}));
  EXPECT_EQ(lines[1]["result_name"], "NVML_ERROR_INVALID_ARGUMENT");
  EXPECT_EQ(lines[2]["function"], "nvmlDeviceResetMemoryLockedClocks");
  EXPECT_EQ(lines[2]["args"], json::object());
  EXPECT_EQ(lines[3]["device"], -1);
}

TEST_F(SimNvmlZeusTest, MemoryLockedClocksAreSharedThroughTheStateFile) {
  const std::string state = Path("state.json");
  InitWith({{"state_file", state}, {"permissions", {{"clocks", true}}}});
  EXPECT_EQ(InChild([&] {
              nvmlDevice_t d = nullptr;
              if (nvml().nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 1;
              return Zeus().set_memory_locked_clocks(d, 1500, 1593) == NVML_SUCCESS ? 0 : 2;
            }),
            0);
  std::ifstream in(state);
  const json saved = json::parse(in);
  const json& changes = saved["devices"].begin().value()["changes"];
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0]["settings"]["mem_locked_mhz"], json({1500, 1593}));
}

// ---- Temperature (versioned) ------------------------------------------------------

TEST_F(SimNvmlZeusTest, TemperatureVMatchesTheUnversionedReading) {
  const nvmlDevice_t device = InitWith({{"gpu", "h100-sxm"}});
  TemperatureV1 t{kTemperatureV1, NVML_TEMPERATURE_GPU, -1};
  ASSERT_EQ(Zeus().get_temperature_v(device, &t), NVML_SUCCESS);
  unsigned plain = 0;
  ASSERT_EQ(nvml().nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU, &plain), NVML_SUCCESS);
  EXPECT_EQ(t.temperature, static_cast<int>(plain));
  EXPECT_GE(t.temperature, 30);
  EXPECT_LE(t.temperature, 100);
  EXPECT_EQ(t.version, kTemperatureV1);  // input fields left alone
  EXPECT_EQ(t.sensor_type, NVML_TEMPERATURE_GPU);
}

TEST_F(SimNvmlZeusTest, TemperatureVRejectsBadArguments) {
  const nvmlDevice_t device = InitWith(json::object());
  TemperatureV1 t{kTemperatureV1 + 1, NVML_TEMPERATURE_GPU, -1};
  EXPECT_EQ(Zeus().get_temperature_v(device, &t), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  t.version = (sizeof(TemperatureV1) | (2u << 24));
  EXPECT_EQ(Zeus().get_temperature_v(device, &t), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  EXPECT_EQ(t.temperature, -1);
  t = {kTemperatureV1, 1, -1};  // NVML_TEMPERATURE_COUNT: no such sensor
  EXPECT_EQ(Zeus().get_temperature_v(device, &t), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Zeus().get_temperature_v(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  t = {kTemperatureV1, NVML_TEMPERATURE_GPU, -1};
  EXPECT_EQ(Zeus().get_temperature_v(nullptr, &t), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(Zeus().get_temperature_v(device, &t), NVML_ERROR_UNINITIALIZED);
}

// ---- Persistence mode ----------------------------------------------------------------

TEST_F(SimNvmlZeusTest, PersistenceModeIsOffByDefaultAndNeedsPermission) {
  const nvmlDevice_t device =
      InitWith({{"permissions", {{"clocks", true}, {"power_limit", true}}}});
  EXPECT_EQ(PersistenceMode(device), 0u);  // NVML_FEATURE_DISABLED
  EXPECT_EQ(Zeus().set_persistence_mode(device, 1), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(PersistenceMode(device), 0u);
  EXPECT_EQ(Zeus().get_persistence_mode(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);

  const nvmlDevice_t allowed =
      InitWith({{"count", 2}, {"permissions", {{"persistence_mode", true}}}});
  nvmlDevice_t second = nullptr;
  ASSERT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(1, &second), NVML_SUCCESS);
  EXPECT_EQ(Zeus().set_persistence_mode(allowed, 1), NVML_SUCCESS);
  EXPECT_EQ(PersistenceMode(allowed), 1u);
  EXPECT_EQ(PersistenceMode(second), 0u);  // per device
  EXPECT_EQ(Zeus().set_persistence_mode(allowed, 2), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(PersistenceMode(allowed), 1u);
  EXPECT_EQ(Zeus().set_persistence_mode(allowed, 0), NVML_SUCCESS);
  EXPECT_EQ(PersistenceMode(allowed), 0u);
  // The clock permission does not grant it.
  EXPECT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(allowed, 900, 900), NVML_ERROR_NO_PERMISSION);
}

TEST_F(SimNvmlZeusTest, PersistenceModeIsLoggedAndSharedThroughTheStateFile) {
  const std::string log = Path("calls.jsonl"), state = Path("state.json");
  const nvmlDevice_t device = InitWith(
      {{"call_log", log}, {"state_file", state}, {"permissions", {{"persistence_mode", true}}}});
  EXPECT_EQ(InChild([&] {
              nvmlDevice_t d = nullptr;
              if (nvml().nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 1;
              return Zeus().set_persistence_mode(d, 1) == NVML_SUCCESS ? 0 : 2;
            }),
            0);
  EXPECT_EQ(PersistenceMode(device), 1u);
  EXPECT_EQ(Zeus().set_persistence_mode(device, 7), NVML_ERROR_INVALID_ARGUMENT);
  const std::vector<json> lines = ReadJsonLines(log);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["function"], "nvmlDeviceSetPersistenceMode");
  EXPECT_EQ(lines[0]["args"], json({{"mode", 1}}));
  EXPECT_NE(lines[0]["pid"], static_cast<long>(getpid()));
  EXPECT_EQ(lines[1]["args"], json({{"mode", 7}}));
  EXPECT_EQ(lines[1]["result_name"], "NVML_ERROR_INVALID_ARGUMENT");
}

TEST_F(SimNvmlZeusTest, PersistenceModeWithoutAStateFileEndsWithTheSession) {
  const json config = {{"permissions", {{"persistence_mode", true}}}};
  const nvmlDevice_t device = InitWith(config);
  ASSERT_EQ(Zeus().set_persistence_mode(device, 1), NVML_SUCCESS);
  ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(Zeus().get_persistence_mode(device, nullptr), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(PersistenceMode(InitWith(config)), 0u);
}

// ---- C2C mode --------------------------------------------------------------------------

TEST_F(SimNvmlZeusTest, C2cModeAnswersOnHopperOnly) {
  // H100 SXM on an x86 host: C2C disabled (nvidia-smi "GPU C2C Mode:
  // Disabled"); A100 and older have no C2C (nvidia-smi "N/A").
  for (const char* gpu : {"h100-sxm", "h200-sxm"}) {
    const nvmlDevice_t device = InitWith({{"gpu", gpu}});
    C2cModeInfoV1 info{7};
    EXPECT_EQ(Zeus().get_c2c_mode_info_v(device, &info), NVML_SUCCESS) << gpu;
    EXPECT_EQ(info.is_c2c_enabled, 0u) << gpu;
    EXPECT_EQ(Zeus().get_c2c_mode_info_v(device, nullptr), NVML_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  }
  for (const char* gpu : {"a100-sxm4-80gb", "a40", "v100-sxm2"}) {
    const nvmlDevice_t device = InitWith({{"gpu", gpu}});
    C2cModeInfoV1 info{7};
    EXPECT_EQ(Zeus().get_c2c_mode_info_v(device, &info), NVML_ERROR_NOT_SUPPORTED) << gpu;
    EXPECT_EQ(info.is_c2c_enabled, 7u) << gpu;
    ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  }
}

TEST_F(SimNvmlZeusTest, C2cModeOfALostGpu) {
  const nvmlDevice_t device = InitWith(
      {{"gpu", "h100-sxm"}, {"epoch_unix_s", NowUnixS() - 10}, {"faults", {{"gpu_lost_at_s", 1}}}});
  C2cModeInfoV1 info{};
  EXPECT_EQ(Zeus().get_c2c_mode_info_v(device, &info), NVML_ERROR_GPU_IS_LOST);
}

// ---- Power by scope ------------------------------------------------------------------

TEST_F(SimNvmlZeusTest, AmpereHasNoMemoryOrModulePowerSensor) {
  for (const char* gpu : {"a100-sxm4-80gb", "a40", "v100-sxm2"}) {
    SCOPED_TRACE(gpu);
    const nvmlDevice_t device = InitWith({{"gpu", gpu}});
    const auto [board_ret, board_mw] = PowerField(device, NVML_FI_DEV_POWER_INSTANT, kScopeGpu);
    EXPECT_EQ(board_ret, NVML_SUCCESS);
    EXPECT_EQ(board_mw, Mw(physics::FindGpu(gpu).idle_w));
    for (unsigned field : {NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_AVERAGE}) {
      EXPECT_EQ(PowerField(device, field, kScopeMemory).first, NVML_ERROR_NOT_SUPPORTED);
      EXPECT_EQ(PowerField(device, field, kScopeModule).first, NVML_ERROR_NOT_SUPPORTED);
    }
    ASSERT_EQ(nvml().nvmlShutdown(), NVML_SUCCESS);
  }
}

TEST_F(SimNvmlZeusTest, HopperReportsMemoryPower) {
  const physics::GpuSpec& gpu = physics::FindGpu("h100-sxm");
  // Idle since long before the 1 s average window: both readings agree.
  const nvmlDevice_t device = InitWith({{"gpu", "h100-sxm"}, {"epoch_unix_s", NowUnixS() - 100}});
  const unsigned idle_memory = Mw(0.66 * gpu.idle_w);
  for (unsigned field : {NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_AVERAGE}) {
    const auto [board_ret, board_mw] = PowerField(device, field, kScopeGpu);
    EXPECT_EQ(board_ret, NVML_SUCCESS);
    EXPECT_NEAR(board_mw, Mw(gpu.idle_w), 1);
    const auto [memory_ret, memory_mw] = PowerField(device, field, kScopeMemory);
    EXPECT_EQ(memory_ret, NVML_SUCCESS);
    EXPECT_NEAR(memory_mw, idle_memory, 1);
    EXPECT_EQ(PowerField(device, field, kScopeModule).first, NVML_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(PowerField(device, field, 3).first, NVML_ERROR_NOT_SUPPORTED);  // GPU_BASE
  }

  // Busy on work with beta = 0.4: the memory-bound 60 % of the power above
  // idle is added to the idle memory power.
  ASSERT_EQ(Zeus().set_load(device, kLoadBusy, 0.4, 1.0), NVML_SUCCESS);
  const double busy_w = physics::Power(gpu, 1.0, gpu.max_sm_mhz);
  ASSERT_LT(busy_w, gpu.tdp_w);  // not capped
  const double memory_w = 0.66 * gpu.idle_w + 0.6 * (busy_w - gpu.idle_w);
  const auto [ret, mw] = PowerField(device, NVML_FI_DEV_POWER_INSTANT, kScopeMemory);
  EXPECT_EQ(ret, NVML_SUCCESS);
  EXPECT_NEAR(mw, memory_w * 1000, 1.0);
  EXPECT_EQ(PowerField(device, NVML_FI_DEV_POWER_INSTANT, kScopeGpu).second, Mw(busy_w));

  // Compute-bound work leaves the memory at its idle draw; blocked on a
  // peer likewise.
  ASSERT_EQ(Zeus().set_load(device, kLoadBusy, 1.0, 1.0), NVML_SUCCESS);
  EXPECT_NEAR(PowerField(device, NVML_FI_DEV_POWER_INSTANT, kScopeMemory).second, idle_memory, 1);
  ASSERT_EQ(Zeus().set_load(device, kLoadBlocked, 1.0, 1.0), NVML_SUCCESS);
  EXPECT_NEAR(PowerField(device, NVML_FI_DEV_POWER_INSTANT, kScopeMemory).second, idle_memory, 1);
}

TEST_F(SimNvmlZeusTest, ScopedFieldsFollowTheFieldFault) {
  const nvmlDevice_t device =
      InitWith({{"gpu", "h100-sxm"}, {"faults", {{"field_values_not_supported", true}}}});
  EXPECT_EQ(PowerField(device, NVML_FI_DEV_POWER_AVERAGE, kScopeMemory).first,
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(PowerField(device, NVML_FI_DEV_POWER_AVERAGE, kScopeGpu).first,
            NVML_ERROR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace joulepipe::sim_nvml::testing

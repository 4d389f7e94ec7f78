// Loads the built simulated NVML library (JOULEPIPE_SIM_NVML) with dlopen,
// as any NVML client would, and writes its configuration.
//
// The library is process-wide: each test writes its config, calls Init (which
// re-reads the config because the session count is 0) and ShutdownAll at the
// end so the next test starts a fresh session.
#pragma once

#include <dlfcn.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "joulepipe/gpu/nvml_api.hpp"

namespace joulepipe::sim_nvml::testing {

// Looks `name` up in `lib` into `fn`; fails the current test if it is missing.
template <class Fn>
void Lookup(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) ADD_FAILURE() << "missing symbol " << name;
}

// Every function of nvml_api.hpp, looked up by name in the loaded library.
struct Nvml {
  decltype(&::nvmlInit_v2) nvmlInit_v2 = nullptr;
  decltype(&::nvmlInitWithFlags) nvmlInitWithFlags = nullptr;
  decltype(&::nvmlShutdown) nvmlShutdown = nullptr;
  decltype(&::nvmlErrorString) nvmlErrorString = nullptr;
  decltype(&::nvmlSystemGetDriverVersion) nvmlSystemGetDriverVersion = nullptr;
  decltype(&::nvmlSystemGetNVMLVersion) nvmlSystemGetNVMLVersion = nullptr;
  decltype(&::nvmlSystemGetCudaDriverVersion) nvmlSystemGetCudaDriverVersion = nullptr;
  decltype(&::nvmlSystemGetCudaDriverVersion_v2) nvmlSystemGetCudaDriverVersion_v2 = nullptr;
  decltype(&::nvmlDeviceGetCount_v2) nvmlDeviceGetCount_v2 = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) nvmlDeviceGetHandleByIndex_v2 = nullptr;
  decltype(&::nvmlDeviceGetHandleByUUID) nvmlDeviceGetHandleByUUID = nullptr;
  decltype(&::nvmlDeviceGetIndex) nvmlDeviceGetIndex = nullptr;
  decltype(&::nvmlDeviceGetName) nvmlDeviceGetName = nullptr;
  decltype(&::nvmlDeviceGetUUID) nvmlDeviceGetUUID = nullptr;
  decltype(&::nvmlDeviceGetArchitecture) nvmlDeviceGetArchitecture = nullptr;
  decltype(&::nvmlDeviceGetMigMode) nvmlDeviceGetMigMode = nullptr;
  decltype(&::nvmlDeviceGetTotalEnergyConsumption) nvmlDeviceGetTotalEnergyConsumption = nullptr;
  decltype(&::nvmlDeviceGetPowerUsage) nvmlDeviceGetPowerUsage = nullptr;
  decltype(&::nvmlDeviceGetFieldValues) nvmlDeviceGetFieldValues = nullptr;
  decltype(&::nvmlDeviceGetUtilizationRates) nvmlDeviceGetUtilizationRates = nullptr;
  decltype(&::nvmlDeviceGetTemperature) nvmlDeviceGetTemperature = nullptr;
  decltype(&::nvmlDeviceGetSupportedMemoryClocks) nvmlDeviceGetSupportedMemoryClocks = nullptr;
  decltype(&::nvmlDeviceGetSupportedGraphicsClocks) nvmlDeviceGetSupportedGraphicsClocks = nullptr;
  decltype(&::nvmlDeviceGetClockInfo) nvmlDeviceGetClockInfo = nullptr;
  decltype(&::nvmlDeviceGetMaxClockInfo) nvmlDeviceGetMaxClockInfo = nullptr;
  decltype(&::nvmlDeviceGetCurrentClocksThrottleReasons) nvmlDeviceGetCurrentClocksThrottleReasons =
      nullptr;
  decltype(&::nvmlDeviceGetPowerManagementLimit) nvmlDeviceGetPowerManagementLimit = nullptr;
  decltype(&::nvmlDeviceGetPowerManagementLimitConstraints)
      nvmlDeviceGetPowerManagementLimitConstraints = nullptr;
  decltype(&::nvmlDeviceGetPowerManagementDefaultLimit) nvmlDeviceGetPowerManagementDefaultLimit =
      nullptr;
  decltype(&::nvmlDeviceGetEnforcedPowerLimit) nvmlDeviceGetEnforcedPowerLimit = nullptr;
  decltype(&::nvmlDeviceSetPowerManagementLimit) nvmlDeviceSetPowerManagementLimit = nullptr;
  decltype(&::nvmlDeviceSetGpuLockedClocks) nvmlDeviceSetGpuLockedClocks = nullptr;
  decltype(&::nvmlDeviceResetGpuLockedClocks) nvmlDeviceResetGpuLockedClocks = nullptr;
  void* handle = nullptr;
};

// The library, loaded once per process (RTLD_LOCAL | RTLD_NOW). Fails the
// current test if it or one of its functions is missing.
inline const Nvml& Lib() {
  static Nvml nvml = [] {
    Nvml n;
    n.handle = dlopen(JOULEPIPE_SIM_NVML, RTLD_LOCAL | RTLD_NOW);
    if (n.handle == nullptr) {
      ADD_FAILURE() << "dlopen " << JOULEPIPE_SIM_NVML << ": " << dlerror();
      return n;
    }
    Lookup(n.handle, "nvmlInit_v2", n.nvmlInit_v2);
    Lookup(n.handle, "nvmlInitWithFlags", n.nvmlInitWithFlags);
    Lookup(n.handle, "nvmlShutdown", n.nvmlShutdown);
    Lookup(n.handle, "nvmlErrorString", n.nvmlErrorString);
    Lookup(n.handle, "nvmlSystemGetDriverVersion", n.nvmlSystemGetDriverVersion);
    Lookup(n.handle, "nvmlSystemGetNVMLVersion", n.nvmlSystemGetNVMLVersion);
    Lookup(n.handle, "nvmlSystemGetCudaDriverVersion", n.nvmlSystemGetCudaDriverVersion);
    Lookup(n.handle, "nvmlSystemGetCudaDriverVersion_v2", n.nvmlSystemGetCudaDriverVersion_v2);
    Lookup(n.handle, "nvmlDeviceGetCount_v2", n.nvmlDeviceGetCount_v2);
    Lookup(n.handle, "nvmlDeviceGetHandleByIndex_v2", n.nvmlDeviceGetHandleByIndex_v2);
    Lookup(n.handle, "nvmlDeviceGetHandleByUUID", n.nvmlDeviceGetHandleByUUID);
    Lookup(n.handle, "nvmlDeviceGetIndex", n.nvmlDeviceGetIndex);
    Lookup(n.handle, "nvmlDeviceGetName", n.nvmlDeviceGetName);
    Lookup(n.handle, "nvmlDeviceGetUUID", n.nvmlDeviceGetUUID);
    Lookup(n.handle, "nvmlDeviceGetArchitecture", n.nvmlDeviceGetArchitecture);
    Lookup(n.handle, "nvmlDeviceGetMigMode", n.nvmlDeviceGetMigMode);
    Lookup(n.handle, "nvmlDeviceGetTotalEnergyConsumption", n.nvmlDeviceGetTotalEnergyConsumption);
    Lookup(n.handle, "nvmlDeviceGetPowerUsage", n.nvmlDeviceGetPowerUsage);
    Lookup(n.handle, "nvmlDeviceGetFieldValues", n.nvmlDeviceGetFieldValues);
    Lookup(n.handle, "nvmlDeviceGetUtilizationRates", n.nvmlDeviceGetUtilizationRates);
    Lookup(n.handle, "nvmlDeviceGetTemperature", n.nvmlDeviceGetTemperature);
    Lookup(n.handle, "nvmlDeviceGetSupportedMemoryClocks", n.nvmlDeviceGetSupportedMemoryClocks);
    Lookup(n.handle, "nvmlDeviceGetSupportedGraphicsClocks",
           n.nvmlDeviceGetSupportedGraphicsClocks);
    Lookup(n.handle, "nvmlDeviceGetClockInfo", n.nvmlDeviceGetClockInfo);
    Lookup(n.handle, "nvmlDeviceGetMaxClockInfo", n.nvmlDeviceGetMaxClockInfo);
    Lookup(n.handle, "nvmlDeviceGetCurrentClocksThrottleReasons",
           n.nvmlDeviceGetCurrentClocksThrottleReasons);
    Lookup(n.handle, "nvmlDeviceGetPowerManagementLimit", n.nvmlDeviceGetPowerManagementLimit);
    Lookup(n.handle, "nvmlDeviceGetPowerManagementLimitConstraints",
           n.nvmlDeviceGetPowerManagementLimitConstraints);
    Lookup(n.handle, "nvmlDeviceGetPowerManagementDefaultLimit",
           n.nvmlDeviceGetPowerManagementDefaultLimit);
    Lookup(n.handle, "nvmlDeviceGetEnforcedPowerLimit", n.nvmlDeviceGetEnforcedPowerLimit);
    Lookup(n.handle, "nvmlDeviceSetPowerManagementLimit", n.nvmlDeviceSetPowerManagementLimit);
    Lookup(n.handle, "nvmlDeviceSetGpuLockedClocks", n.nvmlDeviceSetGpuLockedClocks);
    Lookup(n.handle, "nvmlDeviceResetGpuLockedClocks", n.nvmlDeviceResetGpuLockedClocks);
    return n;
  }();
  return nvml;
}

inline double NowUnixS() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// A fresh directory under the test temp dir.
inline std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "sim_nvml_XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const char* dir = mkdtemp(buf.data());
  if (dir == nullptr) ADD_FAILURE() << "mkdtemp failed";
  return dir ? dir : "/tmp";
}

inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// Base fixture: a temp dir, a config written to it and named by
// JOULEPIPE_SIM_NVML_CONFIG, no env overrides, every session closed at the end.
class SimNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Lib().handle, nullptr);
    dir_ = MakeTempDir();
    unsetenv("JOULEPIPE_SIM_NVML_GPU");
    unsetenv("JOULEPIPE_SIM_NVML_COUNT");
    unsetenv("JOULEPIPE_SIM_NVML_CONFIG");
  }
  void TearDown() override {
    while (nvml().nvmlShutdown() == NVML_SUCCESS) {
    }
    unsetenv("JOULEPIPE_SIM_NVML_CONFIG");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const Nvml& nvml() const { return Lib(); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `config` and points the library at it (read at the next init).
  void UseConfig(const nlohmann::json& config) {
    const std::string path = Path("config.json");
    std::ofstream(path) << config.dump(1);
    setenv("JOULEPIPE_SIM_NVML_CONFIG", path.c_str(), 1);
  }

  // Inits with `config` and returns the handle of device `index`.
  nvmlDevice_t InitWith(const nlohmann::json& config, unsigned index = 0) {
    UseConfig(config);
    EXPECT_EQ(nvml().nvmlInit_v2(), NVML_SUCCESS);
    nvmlDevice_t device = nullptr;
    EXPECT_EQ(nvml().nvmlDeviceGetHandleByIndex_v2(index, &device), NVML_SUCCESS);
    return device;
  }

  unsigned long long Energy(nvmlDevice_t device) const {
    unsigned long long mj = 0;
    EXPECT_EQ(nvml().nvmlDeviceGetTotalEnergyConsumption(device, &mj), NVML_SUCCESS);
    return mj;
  }

  unsigned Clock(nvmlDevice_t device) const {
    unsigned mhz = 0;
    EXPECT_EQ(nvml().nvmlDeviceGetClockInfo(device, NVML_CLOCK_SM, &mhz), NVML_SUCCESS);
    return mhz;
  }

  // The instantaneous power field (mW).
  unsigned InstantPowerMw(nvmlDevice_t device) const {
    nvmlFieldValue_t value{};
    value.fieldId = NVML_FI_DEV_POWER_INSTANT;
    EXPECT_EQ(nvml().nvmlDeviceGetFieldValues(device, 1, &value), NVML_SUCCESS);
    EXPECT_EQ(value.nvmlReturn, NVML_SUCCESS);
    return value.value.uiVal;
  }

  std::string dir_;
};

// Runs `child` in a forked process; returns its exit status (0 = success).
template <class F>
int InChild(F&& child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

}  // namespace joulepipe::sim_nvml::testing

// The exported NVML C functions (docs/sim-nvml.md lists what each returns).
// Every function runs through WithDevice / WithLibrary (library.hpp): one
// mutex, initialisation and handle checks, injected faults, no exception
// ever crosses the C boundary.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "library.hpp"
#include "nvml_extra.hpp"

#define SIM_NVML_EXPORT extern "C" __attribute__((visibility("default")))

using namespace joulepipe::sim_nvml;

namespace {

unsigned Mw(double watts) {
  return static_cast<unsigned>(std::lround(watts * 1000.0));
}

// The 1 s mean power; NVML's "average" power reading.
double AverageW(DeviceCall& c) {
  return AveragePowerW(c.device(), c.config().epoch_unix_s, c.history(), c.now(), 1.0);
}

// Fills a count/array pair as NVML does: INSUFFICIENT_SIZE (with the needed
// count) when the array is null or too short.
nvmlReturn_t FillList(const std::vector<unsigned>& values, unsigned* count, unsigned* out) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned needed = static_cast<unsigned>(values.size());
  if (out == nullptr || *count < needed) {
    *count = needed;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(values.begin(), values.end(), out);
  *count = needed;
  return NVML_SUCCESS;
}

// 30 C ambient plus 40 C at the default limit, following the 1 s power
// (plausible, no thermal lag).
unsigned TemperatureC(DeviceCall& c) {
  return static_cast<unsigned>(std::lround(30.0 + 40.0 * AverageW(c) / c.gpu().tdp_w));
}

// A power field (NVML_FI_DEV_POWER_*) for one power scope, in mW; false when
// the device has no sensor for that scope. A100 and H100 SXM boards report
// the GPU scope; only Hopper reports the memory subsystem; neither is a
// Grace Hopper module (docs/sim-nvml.md, "Power scopes").
bool ScopedPowerMw(DeviceCall& c, unsigned field_id, unsigned scope, unsigned* mw) {
  const double board_w = field_id == NVML_FI_DEV_POWER_AVERAGE ? AverageW(c) : c.Now().power_w;
  switch (scope) {
    case NVML_POWER_SCOPE_GPU:
      *mw = Mw(board_w);
      return true;
    case NVML_POWER_SCOPE_MEMORY:
      if (c.device().architecture != NVML_DEVICE_ARCH_HOPPER) return false;
      *mw = Mw(board_w * MemoryPowerShare(c.gpu(), c.Now()));
      return true;
    default:
      return false;
  }
}

std::string ArgsJson(std::initializer_list<std::pair<const char*, unsigned>> args) {
  std::string s = "{";
  for (const auto& [k, v] : args) {
    if (s.size() > 1) s += ',';
    s += '"';
    s += k;
    s += "\":";
    s += std::to_string(v);
  }
  return s + "}";
}

// A setter: runs `body` like WithDevice, then logs the call with its result
// (also when it failed before reaching the body), under the same lock so the
// log order is the order in which settings changed.
template <class Body>
nvmlReturn_t Setter(const char* function, nvmlDevice_t device, const std::string& args,
                    Body&& body) {
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  const nvmlReturn_t result = RunLocked(lib, function, device, body);
  if (lib.init_count > 0) {
    int index = -1;
    if (device != nullptr && device >= &lib.handles[0] && device < &lib.handles[kMaxDevices])
      index = static_cast<int>(device->index);
    try {
      LogSetter(lib, function, index, args, result);
    } catch (const std::exception& e) {
      ReportInternalError(lib, function, e.what());
    }
  }
  return result;
}

}  // namespace

// ---- Session and system -------------------------------------------------------

SIM_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  return InitSession();
}
SIM_NVML_EXPORT nvmlReturn_t nvmlInit(void) {
  return InitSession();
}
SIM_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) {
  return InitSession();
}
SIM_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  return ShutdownSession();
}

SIM_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  return ErrorDescription(result);
}

SIM_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return WithLibrary(__func__, [&](Library& lib) {
    return CopyString(lib.config.driver_version, version, length);
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return WithLibrary(__func__, [&](Library& lib) {
    const std::string v =
        std::to_string(lib.config.cuda_driver_version / 1000) + "." + lib.config.driver_version;
    return CopyString(v, version, length);
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return WithLibrary(__func__, [&](Library& lib) {
    if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = lib.config.cuda_driver_version;
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

// ---- Enumeration and identity -------------------------------------------------

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  return WithLibrary(__func__, [&](Library& lib) {
    if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = static_cast<unsigned>(lib.config.devices.size());
    return NVML_SUCCESS;
  });
}
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                           nvmlDevice_t* device) {
  return WithLibrary(__func__, [&](Library& lib) {
    if (device == nullptr || index >= lib.config.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &lib.handles[index];
    return NVML_SUCCESS;
  });
}
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return WithLibrary(__func__, [&](Library& lib) {
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < lib.config.devices.size(); ++i) {
      if (lib.config.devices[i].uuid == uuid) {
        *device = &lib.handles[i];
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *index = c.index();
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                               unsigned int length) {
  return WithDevice(__func__, device,
                    [&](DeviceCall& c) { return CopyString(c.gpu().name, name, length); });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                               unsigned int length) {
  return WithDevice(__func__, device,
                    [&](DeviceCall& c) { return CopyString(c.device().uuid, uuid, length); });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                       nvmlDeviceArchitecture_t* arch) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *arch = c.device().architecture;
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                  unsigned int* pendingMode) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!c.device().mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode =
        c.device().mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                                int* minor) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const std::string& id = c.gpu().id;
    switch (c.device().architecture) {
      case NVML_DEVICE_ARCH_VOLTA:
        *major = 7, *minor = 0;
        break;
      case NVML_DEVICE_ARCH_AMPERE:
        *major = 8, *minor = id.starts_with("a100") ? 0 : 6;
        break;
      case NVML_DEVICE_ARCH_ADA:
        *major = 8, *minor = 9;
        break;
      case NVML_DEVICE_ARCH_HOPPER:
        *major = 9, *minor = 0;
        break;
      default:
        return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
  });
}

// ---- Energy, power, load ------------------------------------------------------

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                                 unsigned long long* energy) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (energy == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (c.device().faults.energy_counter_not_supported) return NVML_ERROR_NOT_SUPPORTED;
    *energy = CounterMj(c.device(), c.config().epoch_unix_s, c.config().energy_period_s,
                        c.history(), c.now());
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *power =
        c.config().power_reading == PowerReading::kAverage ? Mw(AverageW(c)) : Mw(c.Now().power_w);
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                      nvmlFieldValue_t* values) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (valuesCount <= 0 || values == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const long long now_us = std::llround(c.now() * 1e6);
    for (int i = 0; i < valuesCount; ++i) {
      nvmlFieldValue_t& v = values[i];
      v.timestamp = now_us;
      v.latencyUsec = 0;
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      std::memset(&v.value, 0, sizeof v.value);
      if (c.device().faults.field_values_not_supported) {
        v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        continue;
      }
      switch (v.fieldId) {
        case NVML_FI_DEV_POWER_AVERAGE:
        case NVML_FI_DEV_POWER_INSTANT:
          v.nvmlReturn = ScopedPowerMw(c, v.fieldId, v.scopeId, &v.value.uiVal)
                             ? NVML_SUCCESS
                             : NVML_ERROR_NOT_SUPPORTED;
          break;
        default:
          v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      }
    }
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                           nvmlUtilization_t* utilization) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const Operating op = c.Now();
    // Memory activity: plausible, not calibrated (docs/sim-nvml.md).
    const double mem = op.utilization * (0.3 + 0.7 * (1.0 - op.compute_fraction));
    utilization->gpu = static_cast<unsigned>(std::lround(100.0 * op.utilization));
    utilization->memory = static_cast<unsigned>(std::lround(100.0 * mem));
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                      nvmlTemperatureSensors_t sensorType,
                                                      unsigned int* temp) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (temp == nullptr || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = TemperatureC(c);
    return NVML_SUCCESS;
  });
}

static_assert(NVML_SIM_TEMPERATURE_V1 == 0x100000Cu, "pynvml's nvmlTemperature_v1");

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device,
                                                       nvmlTemperature_t* temperature) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (temperature == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != NVML_SIM_TEMPERATURE_V1)
      return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    temperature->temperature = static_cast<int>(TemperatureC(c));
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    memory->total = static_cast<unsigned long long>(c.gpu().memory_gib * gib);
    // Idle: the driver's reservation only; under load: 90 % in use.
    const double share = c.Now().idle ? 0.005 : 0.9;
    memory->used = static_cast<unsigned long long>(memory->total * share);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  if (memory != nullptr && memory->version != NVML_SIM_MEMORY_V2)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlMemory_t v1{};
  const nvmlReturn_t r = nvmlDeviceGetMemoryInfo(device, memory ? &v1 : nullptr);
  if (r != NVML_SUCCESS) return r;
  memory->total = v1.total;
  memory->reserved = 0;
  memory->free = v1.free;
  memory->used = v1.used;
  return NVML_SUCCESS;
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device,
                                                           unsigned int* pState) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (pState == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *pState = c.Now().idle ? 8 : 0;  // P8 idle, P0 under load
    return NVML_SUCCESS;
  });
}

// Hopper boards answer (C2C disabled: an H100 SXM on an x86 host); Ampere
// and older have no C2C link and answer NOT_SUPPORTED (nvidia-smi: "GPU C2C
// Mode: N/A"), which is what clients such as Zeus expect off Grace Hopper.
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device,
                                                       nvmlC2cModeInfo_v1_t* c2cModeInfo) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (c2cModeInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (c.device().architecture != NVML_DEVICE_ARCH_HOPPER) return NVML_ERROR_NOT_SUPPORTED;
    c2cModeInfo->isC2cEnabled = 0;
    return NVML_SUCCESS;
  });
}

// ---- Clocks -------------------------------------------------------------------

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device,
                                                                unsigned int* count,
                                                                unsigned int* clocksMHz) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    return FillList(SupportedMemoryClocks(c.gpu()), count, clocksMHz);
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
                                                                  unsigned int memoryClockMHz,
                                                                  unsigned int* count,
                                                                  unsigned int* clocksMHz) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const std::vector<unsigned> memory = SupportedMemoryClocks(c.gpu());
    if (std::find(memory.begin(), memory.end(), memoryClockMHz) == memory.end())
      return NVML_ERROR_NOT_FOUND;
    std::vector<unsigned> clocks;
    for (int mhz : c.gpu().SupportedSmClocks()) clocks.push_back(static_cast<unsigned>(mhz));
    return FillList(clocks, count, clocksMHz);
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                    unsigned int* clock) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        *clock = static_cast<unsigned>(std::lround(c.Now().sm_mhz));
        return NVML_SUCCESS;
      case NVML_CLOCK_MEM:
        *clock = MemoryClockMhz(c.gpu(), c.settings());
        return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO:
        return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                       unsigned int* clock) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        *clock = static_cast<unsigned>(c.gpu().max_sm_mhz);
        return NVML_SUCCESS;
      case NVML_CLOCK_MEM:
        *clock = SupportedMemoryClocks(c.gpu()).front();
        return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO:
        return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long* clocksThrottleReasons) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (clocksThrottleReasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const Operating op = c.Now();
    unsigned long long reasons = 0;
    if (op.idle) reasons |= nvmlClocksThrottleReasonGpuIdle;
    if (op.power_capped) reasons |= nvmlClocksThrottleReasonSwPowerCap;
    *clocksThrottleReasons = reasons;
    return NVML_SUCCESS;
  });
}
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                    unsigned long long* reasons) {
  return nvmlDeviceGetCurrentClocksThrottleReasons(device, reasons);
}

// ---- Power limits ---------------------------------------------------------------

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device,
                                                              unsigned int* mode) {
  return WithDevice(__func__, device, [&](DeviceCall&) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = 1;  // NVML_FEATURE_ENABLED
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                               unsigned int* limit) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = Mw(PowerLimitW(c.gpu(), c.settings()));
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                          unsigned int* minLimit,
                                                                          unsigned int* maxLimit) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (minLimit == nullptr || maxLimit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *minLimit = Mw(c.gpu().power_limit_min_w);
    *maxLimit = Mw(c.gpu().power_limit_max_w);
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                      unsigned int* defaultLimit) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (defaultLimit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *defaultLimit = Mw(c.gpu().tdp_w);
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
                                                             unsigned int* limit) {
  return nvmlDeviceGetPowerManagementLimit(device, limit);
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device,
                                                               unsigned int limit) {
  return Setter(__func__, device, ArgsJson({{"limit_mw", limit}}), [&](DeviceCall& c) {
    if (!c.config().allow_power_limit) return NVML_ERROR_NO_PERMISSION;
    if (limit < Mw(c.gpu().power_limit_min_w) || limit > Mw(c.gpu().power_limit_max_w))
      return NVML_ERROR_INVALID_ARGUMENT;
    Settings s = c.settings();
    s.power_limit_mw = limit;
    c.SetSettings(s);
    return NVML_SUCCESS;
  });
}

// ---- Locked clocks ----------------------------------------------------------------

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device,
                                                          unsigned int minGpuClockMHz,
                                                          unsigned int maxGpuClockMHz) {
  const std::string args = ArgsJson({{"min_mhz", minGpuClockMHz}, {"max_mhz", maxGpuClockMHz}});
  return Setter(__func__, device, args, [&](DeviceCall& c) {
    if (!c.config().allow_clocks) return NVML_ERROR_NO_PERMISSION;
    if (minGpuClockMHz > maxGpuClockMHz) return NVML_ERROR_INVALID_ARGUMENT;
    Settings s = c.settings();
    s.locked = true;
    s.locked_min_mhz = minGpuClockMHz;
    s.locked_max_mhz = maxGpuClockMHz;
    c.SetSettings(s, c.device().clock_switch_s);
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  return Setter(__func__, device, "{}", [&](DeviceCall& c) {
    if (!c.config().allow_clocks) return NVML_ERROR_NO_PERMISSION;
    Settings s = c.settings();
    s.locked = false;
    s.locked_min_mhz = s.locked_max_mhz = 0;
    c.SetSettings(s, c.device().clock_switch_s);
    return NVML_SUCCESS;
  });
}

// Memory locked clocks: Ampere and newer only (NVML: "For Ampere or newer
// fully supported devices"); the device check comes before the permission
// check, since it does not depend on the caller.
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device,
                                                             unsigned int minMemClockMHz,
                                                             unsigned int maxMemClockMHz) {
  const std::string args = ArgsJson({{"min_mhz", minMemClockMHz}, {"max_mhz", maxMemClockMHz}});
  return Setter(__func__, device, args, [&](DeviceCall& c) {
    if (c.device().architecture < NVML_DEVICE_ARCH_AMPERE) return NVML_ERROR_NOT_SUPPORTED;
    if (!c.config().allow_clocks) return NVML_ERROR_NO_PERMISSION;
    if (minMemClockMHz > maxMemClockMHz) return NVML_ERROR_INVALID_ARGUMENT;
    Settings s = c.settings();
    s.mem_locked = true;
    s.mem_locked_min_mhz = minMemClockMHz;
    s.mem_locked_max_mhz = maxMemClockMHz;
    c.SetSettings(s);
    return NVML_SUCCESS;
  });
}

SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
  return Setter(__func__, device, "{}", [&](DeviceCall& c) {
    if (c.device().architecture < NVML_DEVICE_ARCH_AMPERE) return NVML_ERROR_NOT_SUPPORTED;
    if (!c.config().allow_clocks) return NVML_ERROR_NO_PERMISSION;
    Settings s = c.settings();
    s.mem_locked = false;
    s.mem_locked_min_mhz = s.mem_locked_max_mhz = 0;
    c.SetSettings(s);
    return NVML_SUCCESS;
  });
}

// ---- Persistence mode ---------------------------------------------------------------

// Disabled by default (the driver's state after a reboot); kept per device in
// the settings, so with a state file every process sees the same mode.
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                          nvmlEnableState_t* mode) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = c.settings().persistence_mode ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

// Needs permissions.persistence_mode (root on a real driver).
SIM_NVML_EXPORT nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t device,
                                                          nvmlEnableState_t mode) {
  const unsigned requested = static_cast<unsigned>(mode);
  return Setter(__func__, device, ArgsJson({{"mode", requested}}), [&](DeviceCall& c) {
    if (!c.config().allow_persistence_mode) return NVML_ERROR_NO_PERMISSION;
    if (requested != NVML_FEATURE_DISABLED && requested != NVML_FEATURE_ENABLED)
      return NVML_ERROR_INVALID_ARGUMENT;
    Settings s = c.settings();
    s.persistence_mode = requested == NVML_FEATURE_ENABLED;
    c.SetSettings(s);
    return NVML_SUCCESS;
  });
}

// Not part of NVML: lets a client tell this library from a real driver
// without relying on where it was loaded from (gpu::NvmlInfo::simulated).
SIM_NVML_EXPORT int nvmlJoulepipeSimulated(void) {
  return 1;
}

// In-process load (joulepipe/sim_nvml/ext.hpp): the caller says what the
// device runs from now on. A settings change like a locked clock, so the
// energy integral stays exact; not a driver setter, so not logged and no
// permission needed.
SIM_NVML_EXPORT nvmlReturn_t nvmlJoulepipeSimSetLoad(nvmlDevice_t device, int state,
                                                     double compute_fraction, double activity) {
  return WithDevice(__func__, device, [&](DeviceCall& c) {
    if (state < joulepipe::sim_nvml::kLoadSchedule || state > joulepipe::sim_nvml::kLoadBusy)
      return NVML_ERROR_INVALID_ARGUMENT;
    if (!(compute_fraction >= 0 && compute_fraction <= 1) || !(activity >= 0) ||
        !std::isfinite(activity))
      return NVML_ERROR_INVALID_ARGUMENT;
    Settings s = c.settings();
    s.load_state = state;
    s.load_compute_fraction = state == joulepipe::sim_nvml::kLoadBusy ? compute_fraction : 1.0;
    s.load_activity = state == joulepipe::sim_nvml::kLoadBusy ? activity : 1.0;
    c.SetSettings(s);
    return NVML_SUCCESS;
  });
}

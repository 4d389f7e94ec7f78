// Private to src/gpu: the loaded NVML library as a table of function
// pointers, and the helpers that turn NVML return codes into exceptions.
#pragma once

#include <string>

#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/gpu/nvml_api.hpp"

namespace joulepipe::gpu::internal {

// Every NVML function joulepipe calls, resolved by name with dlsym. A null
// pointer is an optional symbol the library lacks (the required ones are
// checked at load time; Library() throws if one is missing).
struct NvmlApi {
  // Required.
  decltype(&nvmlInit_v2) init_v2 = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetCount_v2) device_get_count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) device_get_handle_by_index = nullptr;
  decltype(&nvmlDeviceGetName) device_get_name = nullptr;
  decltype(&nvmlDeviceGetUUID) device_get_uuid = nullptr;
  // Optional: a missing one is NOT_SUPPORTED-like (see Call()).
  decltype(&nvmlSystemGetDriverVersion) system_get_driver_version = nullptr;
  decltype(&nvmlSystemGetNVMLVersion) system_get_nvml_version = nullptr;
  decltype(&nvmlDeviceGetArchitecture) device_get_architecture = nullptr;
  decltype(&nvmlDeviceGetMigMode) device_get_mig_mode = nullptr;
  decltype(&nvmlDeviceGetTotalEnergyConsumption) device_get_total_energy_consumption = nullptr;
  decltype(&nvmlDeviceGetPowerUsage) device_get_power_usage = nullptr;
  decltype(&nvmlDeviceGetFieldValues) device_get_field_values = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) device_get_utilization_rates = nullptr;
  decltype(&nvmlDeviceGetTemperature) device_get_temperature = nullptr;
  decltype(&nvmlDeviceGetSupportedMemoryClocks) device_get_supported_memory_clocks = nullptr;
  decltype(&nvmlDeviceGetSupportedGraphicsClocks) device_get_supported_graphics_clocks = nullptr;
  decltype(&nvmlDeviceGetClockInfo) device_get_clock_info = nullptr;
  decltype(&nvmlDeviceGetMaxClockInfo) device_get_max_clock_info = nullptr;
  decltype(&nvmlDeviceGetCurrentClocksThrottleReasons) device_get_throttle_reasons = nullptr;
  decltype(&nvmlDeviceGetPowerManagementLimit) device_get_power_limit = nullptr;
  decltype(&nvmlDeviceGetPowerManagementLimitConstraints) device_get_power_limit_constraints =
      nullptr;
  decltype(&nvmlDeviceGetPowerManagementDefaultLimit) device_get_power_default_limit = nullptr;
  decltype(&nvmlDeviceGetEnforcedPowerLimit) device_get_enforced_power_limit = nullptr;
  decltype(&nvmlDeviceSetPowerManagementLimit) device_set_power_limit = nullptr;
  decltype(&nvmlDeviceSetGpuLockedClocks) device_set_locked_clocks = nullptr;
  decltype(&nvmlDeviceResetGpuLockedClocks) device_reset_locked_clocks = nullptr;
  decltype(&nvmlDeviceSetMemoryLockedClocks) device_set_memory_locked_clocks = nullptr;
  decltype(&nvmlDeviceResetMemoryLockedClocks) device_reset_memory_locked_clocks = nullptr;
  decltype(&nvmlDeviceGetPersistenceMode) device_get_persistence_mode = nullptr;
  decltype(&nvmlDeviceSetPersistenceMode) device_set_persistence_mode = nullptr;
};

struct LoadedNvml {
  NvmlApi api;
  NvmlInfo info;
  void* handle = nullptr;  // dlopen's, for the simulated library's extensions (sim_stream.cpp)
};

// The process-wide library (nvml.hpp has the contract); throws
// NvmlUnavailableError. After the first success, a lock-free read.
const LoadedNvml& Library();

// Throws the NvmlError (or NvmlPermissionError) for `code` from `function`
// on `device` ("" when not about one device), with a hint for the codes
// where NVML's text alone does not say what to do.
[[noreturn]] void ThrowNvmlError(nvmlReturn_t code, const std::string& function,
                                 const std::string& device);

// Calls `fn(args...)` if the symbol is present, else returns
// NVML_ERROR_FUNCTION_NOT_FOUND.
template <typename Fn, typename... Args>
nvmlReturn_t Call(Fn fn, Args... args) {
  return fn == nullptr ? NVML_ERROR_FUNCTION_NOT_FOUND : fn(args...);
}

// Calls and throws on any error.
template <typename Fn, typename... Args>
void Check(const char* function, const std::string& device, Fn fn, Args... args) {
  const nvmlReturn_t code = Call(fn, args...);
  if (code != NVML_SUCCESS) ThrowNvmlError(code, function, device);
}

}  // namespace joulepipe::gpu::internal

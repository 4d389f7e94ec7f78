// Device: NVML reads and setters for one GPU, and the device listing.
#include "joulepipe/gpu/device.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/visible_devices.hpp"
#include "nvml_library.hpp"

namespace joulepipe::gpu {

using internal::Call;
using internal::Check;
using internal::Library;
using internal::ThrowNvmlError;

namespace {

const internal::NvmlApi& Api() {
  return Library().api;
}

nvmlClockType_t ToNvml(ClockDomain domain) {
  switch (domain) {
    case ClockDomain::kGraphics:
      return NVML_CLOCK_GRAPHICS;
    case ClockDomain::kSm:
      return NVML_CLOCK_SM;
    case ClockDomain::kMemory:
      return NVML_CLOCK_MEM;
  }
  return NVML_CLOCK_SM;
}

std::string Watts(double w) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f W", w);
  return buffer;
}

// A field value as milliwatts; false if it is not an integer-like value.
bool FieldMilliwatts(const nvmlFieldValue_t& v, std::uint32_t* mw) {
  switch (v.valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      *mw = v.value.uiVal;
      return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      *mw = static_cast<std::uint32_t>(v.value.ulVal);
      return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      *mw = static_cast<std::uint32_t>(v.value.ullVal);
      return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      *mw = static_cast<std::uint32_t>(std::max<long long>(v.value.sllVal, 0));
      return true;
    case NVML_VALUE_TYPE_SIGNED_INT:
      *mw = static_cast<std::uint32_t>(std::max(v.value.siVal, 0));
      return true;
    case NVML_VALUE_TYPE_DOUBLE:
      *mw = static_cast<std::uint32_t>(std::max(std::llround(v.value.dVal), 0LL));
      return true;
  }
  return false;
}

// Supported-clock lists: NVML fills `count` entries and reports
// NVML_ERROR_INSUFFICIENT_SIZE (with the needed count) if the buffer is short.
std::vector<int> ClockList(const char* function, const std::string& device,
                           const std::function<nvmlReturn_t(unsigned*, unsigned*)>& query) {
  std::vector<unsigned> buffer(256);
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned count = static_cast<unsigned>(buffer.size());
    const nvmlReturn_t code = query(&count, buffer.data());
    if (code == NVML_ERROR_INSUFFICIENT_SIZE && count > buffer.size()) {
      buffer.resize(count);
      continue;
    }
    if (code != NVML_SUCCESS) ThrowNvmlError(code, function, device);
    std::vector<int> clocks(buffer.begin(),
                            buffer.begin() + std::min<size_t>(count, buffer.size()));
    std::sort(clocks.begin(), clocks.end(), std::greater<int>());
    clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
    return clocks;
  }
  ThrowNvmlError(NVML_ERROR_INSUFFICIENT_SIZE, function, device);
}

}  // namespace

// Opens devices: fills a Device's private identity.
class DeviceOpener {
 public:
  static Device Open(unsigned nvml_index, int visible_index) {
    const internal::NvmlApi& api = Api();
    const std::string where = "GPU " + std::to_string(nvml_index);
    Device d;
    d.nvml_index_ = nvml_index;
    d.visible_index_ = visible_index;
    Check("nvmlDeviceGetHandleByIndex_v2", where, api.device_get_handle_by_index, nvml_index,
          &d.handle_);
    d.uuid_ = ReadString("nvmlDeviceGetUUID", where, api.device_get_uuid, d.handle_);
    d.name_ = ReadString("nvmlDeviceGetName", d.Describe(), api.device_get_name, d.handle_);

    nvmlDeviceArchitecture_t arch = 0;
    const nvmlReturn_t arch_code = Call(api.device_get_architecture, d.handle_, &arch);
    if (arch_code == NVML_SUCCESS) {
      d.architecture_ = ArchitectureName(arch);
    } else if (arch_code == NVML_ERROR_NOT_SUPPORTED ||
               arch_code == NVML_ERROR_FUNCTION_NOT_FOUND) {
      d.architecture_ = "unknown";
    } else {
      ThrowNvmlError(arch_code, "nvmlDeviceGetArchitecture", d.Describe());
    }

    unsigned current = NVML_DEVICE_MIG_DISABLE, pending = NVML_DEVICE_MIG_DISABLE;
    const nvmlReturn_t mig_code = Call(api.device_get_mig_mode, d.handle_, &current, &pending);
    if (mig_code == NVML_SUCCESS) {
      d.mig_enabled_ = current == NVML_DEVICE_MIG_ENABLE;
    } else if (mig_code != NVML_ERROR_NOT_SUPPORTED && mig_code != NVML_ERROR_FUNCTION_NOT_FOUND) {
      ThrowNvmlError(mig_code, "nvmlDeviceGetMigMode", d.Describe());
    }
    return d;
  }

  static unsigned Count() {
    unsigned count = 0;
    Check("nvmlDeviceGetCount_v2", "", Api().device_get_count, &count);
    return count;
  }

  // The UUID of device `nvml_index`, for resolving CUDA_VISIBLE_DEVICES.
  static DeviceId Id(unsigned nvml_index) {
    const std::string where = "GPU " + std::to_string(nvml_index);
    nvmlDevice_t handle = nullptr;
    Check("nvmlDeviceGetHandleByIndex_v2", where, Api().device_get_handle_by_index, nvml_index,
          &handle);
    return {nvml_index, ReadString("nvmlDeviceGetUUID", where, Api().device_get_uuid, handle)};
  }

 private:
  static std::string ReadString(const char* function, const std::string& where,
                                nvmlReturn_t (*fn)(nvmlDevice_t, char*, unsigned),
                                nvmlDevice_t handle) {
    char buffer[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    static_assert(NVML_DEVICE_UUID_V2_BUFFER_SIZE >= NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    Check(function, where, fn, handle, buffer, static_cast<unsigned>(sizeof buffer));
    buffer[sizeof buffer - 1] = '\0';
    return buffer;
  }
};

// ---- Free functions ----------------------------------------------------------------

std::string_view PowerSourceName(PowerSource source) {
  switch (source) {
    case PowerSource::kFieldInstant:
      return "field NVML_FI_DEV_POWER_INSTANT";
    case PowerSource::kFieldAverage:
      return "field NVML_FI_DEV_POWER_AVERAGE";
    case PowerSource::kPowerUsage:
      return "nvmlDeviceGetPowerUsage";
  }
  return "unknown";
}

std::vector<std::string> ThrottleReasons::Names() const {
  static constexpr struct {
    unsigned long long bit;
    const char* name;
  } kReasons[] = {
      {nvmlClocksThrottleReasonGpuIdle, "gpu_idle"},
      {nvmlClocksThrottleReasonApplicationsClocksSetting, "applications_clocks_setting"},
      {nvmlClocksThrottleReasonSwPowerCap, "sw_power_cap"},
      {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
      {nvmlClocksThrottleReasonSyncBoost, "sync_boost"},
      {nvmlClocksThrottleReasonSwThermalSlowdown, "sw_thermal_slowdown"},
      {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
      {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {nvmlClocksThrottleReasonDisplayClockSetting, "display_clock_setting"},
  };
  std::vector<std::string> names;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t flag = std::uint64_t{1} << bit;
    if ((mask & flag) == 0) continue;
    const char* name = nullptr;
    for (const auto& reason : kReasons) {
      if (reason.bit == flag) name = reason.name;
    }
    if (name != nullptr) {
      names.emplace_back(name);
    } else {
      char buffer[40];
      std::snprintf(buffer, sizeof buffer, "unknown_0x%llx", static_cast<unsigned long long>(flag));
      names.emplace_back(buffer);
    }
  }
  return names;
}

std::string ArchitectureName(unsigned nvml_architecture) {
  switch (nvml_architecture) {
    case 2:
      return "Kepler";
    case 3:
      return "Maxwell";
    case 4:
      return "Pascal";
    case NVML_DEVICE_ARCH_VOLTA:
      return "Volta";
    case NVML_DEVICE_ARCH_TURING:
      return "Turing";
    case NVML_DEVICE_ARCH_AMPERE:
      return "Ampere";
    case NVML_DEVICE_ARCH_ADA:
      return "Ada";
    case NVML_DEVICE_ARCH_HOPPER:
      return "Hopper";
    case 10:
      return "Blackwell";
    default:
      return "unknown (" + std::to_string(nvml_architecture) + ")";
  }
}

DeviceList ListVisibleDevices(MigPolicy mig) {
  const unsigned count = DeviceOpener::Count();
  const std::optional<std::string> visible = CudaVisibleDevicesFromEnv();
  std::vector<DeviceId> ids;
  for (unsigned i = 0; i < count; ++i) {
    // UUIDs are only needed to match GPU-... entries; plain indices need none,
    // so a lost GPU that is not visible does not stop the listing.
    if (visible.has_value() && visible->find("GPU-") != std::string::npos) {
      ids.push_back(DeviceOpener::Id(i));
    } else {
      ids.push_back({i, ""});
    }
  }
  const VisibleDevices resolved = ResolveVisibleDevices(visible, ids);
  DeviceList list;
  list.visible_devices_note = resolved.stopped;
  for (unsigned index : resolved.nvml_indices) {
    Device device = DeviceOpener::Open(index, static_cast<int>(list.devices.size()));
    if (mig == MigPolicy::kRefuse && device.mig_enabled()) {
      throw MigError(device.Describe() + " (" + device.name() +
                     ") is in MIG mode; joulepipe controls whole GPUs (clocks and power limits "
                     "cannot be set per MIG instance): disable MIG (`nvidia-smi -i " +
                     std::to_string(index) +
                     " -mig 0` as root, then reset the GPU) or leave this GPU out of "
                     "CUDA_VISIBLE_DEVICES");
    }
    list.devices.push_back(std::move(device));
  }
  return list;
}

std::vector<Device> ListAllDevices() {
  const unsigned count = DeviceOpener::Count();
  std::vector<Device> devices;
  for (unsigned i = 0; i < count; ++i) devices.push_back(DeviceOpener::Open(i, -1));
  return devices;
}

Device DeviceByNvmlIndex(int nvml_index) {
  const unsigned count = DeviceOpener::Count();
  if (nvml_index < 0 || static_cast<unsigned>(nvml_index) >= count) {
    throw GpuArgumentError("no GPU with NVML index " + std::to_string(nvml_index) +
                           " (this node has " + std::to_string(count) + ")");
  }
  return DeviceOpener::Open(static_cast<unsigned>(nvml_index), -1);
}

// ---- Device ------------------------------------------------------------------------

std::string Device::Describe() const {
  return "GPU " + std::to_string(nvml_index_) + (uuid_.empty() ? "" : " (" + uuid_ + ")");
}

std::optional<EnergyReading> Device::ReadEnergy() const {
  unsigned long long mj = 0;
  const nvmlReturn_t code = Call(Api().device_get_total_energy_consumption, handle_, &mj);
  if (code == NVML_ERROR_NOT_SUPPORTED || code == NVML_ERROR_FUNCTION_NOT_FOUND) {
    return std::nullopt;
  }
  if (code != NVML_SUCCESS) ThrowNvmlError(code, "nvmlDeviceGetTotalEnergyConsumption", Describe());
  return EnergyReading{mj};
}

bool Device::HasEnergyCounter() const {
  return ReadEnergy().has_value();
}

namespace {

PowerReading ReadPower(const Device& device, unsigned field, PowerSource field_source) {
  const internal::NvmlApi& api = Api();
  nvmlFieldValue_t value = {};
  value.fieldId = field;
  const nvmlReturn_t code = Call(api.device_get_field_values, device.handle(), 1, &value);
  const bool unsupported = code == NVML_ERROR_FUNCTION_NOT_FOUND ||
                           code == NVML_ERROR_NOT_SUPPORTED ||
                           code == NVML_ERROR_INVALID_ARGUMENT ||  // older drivers: unknown field
                           (code == NVML_SUCCESS && value.nvmlReturn == NVML_ERROR_NOT_SUPPORTED);
  if (!unsupported) {
    const std::string function =
        std::string("nvmlDeviceGetFieldValues(") +
        (field == NVML_FI_DEV_POWER_INSTANT ? "NVML_FI_DEV_POWER_INSTANT"
                                            : "NVML_FI_DEV_POWER_AVERAGE") +
        ")";
    if (code != NVML_SUCCESS) ThrowNvmlError(code, function, device.Describe());
    if (value.nvmlReturn != NVML_SUCCESS)
      ThrowNvmlError(value.nvmlReturn, function, device.Describe());
    PowerReading reading;
    reading.source = field_source;
    if (FieldMilliwatts(value, &reading.milliwatts)) return reading;
  }
  PowerReading reading;
  reading.source = PowerSource::kPowerUsage;
  unsigned mw = 0;
  Check("nvmlDeviceGetPowerUsage", device.Describe(), api.device_get_power_usage, device.handle(),
        &mw);
  reading.milliwatts = mw;
  return reading;
}

}  // namespace

PowerReading Device::InstantPower() const {
  return ReadPower(*this, NVML_FI_DEV_POWER_INSTANT, PowerSource::kFieldInstant);
}

PowerReading Device::AveragePower() const {
  return ReadPower(*this, NVML_FI_DEV_POWER_AVERAGE, PowerSource::kFieldAverage);
}

PowerLimits Device::GetPowerLimits() const {
  const internal::NvmlApi& api = Api();
  const std::string where = Describe();
  unsigned current = 0, def = 0, min = 0, max = 0, enforced = 0;
  Check("nvmlDeviceGetPowerManagementLimit", where, api.device_get_power_limit, handle_, &current);
  Check("nvmlDeviceGetPowerManagementDefaultLimit", where, api.device_get_power_default_limit,
        handle_, &def);
  Check("nvmlDeviceGetPowerManagementLimitConstraints", where,
        api.device_get_power_limit_constraints, handle_, &min, &max);
  const nvmlReturn_t code = Call(api.device_get_enforced_power_limit, handle_, &enforced);
  if (code == NVML_ERROR_NOT_SUPPORTED || code == NVML_ERROR_FUNCTION_NOT_FOUND) {
    enforced = current;
  } else if (code != NVML_SUCCESS) {
    ThrowNvmlError(code, "nvmlDeviceGetEnforcedPowerLimit", where);
  }
  return {current * 1e-3, def * 1e-3, min * 1e-3, max * 1e-3, enforced * 1e-3};
}

std::vector<int> Device::SupportedMemoryClocks() const {
  const auto fn = Api().device_get_supported_memory_clocks;
  return ClockList(
      "nvmlDeviceGetSupportedMemoryClocks", Describe(),
      [&](unsigned* count, unsigned* clocks) { return Call(fn, handle_, count, clocks); });
}

std::vector<int> Device::SupportedGraphicsClocks(int memory_mhz) const {
  const auto fn = Api().device_get_supported_graphics_clocks;
  return ClockList("nvmlDeviceGetSupportedGraphicsClocks", Describe(),
                   [&](unsigned* count, unsigned* clocks) {
                     return Call(fn, handle_, static_cast<unsigned>(memory_mhz), count, clocks);
                   });
}

std::vector<int> Device::SupportedSmClocks() const {
  const std::vector<int> memory = SupportedMemoryClocks();
  if (memory.empty()) return {};
  return SupportedGraphicsClocks(memory.front());
}

int Device::CurrentClock(ClockDomain domain) const {
  unsigned mhz = 0;
  Check("nvmlDeviceGetClockInfo", Describe(), Api().device_get_clock_info, handle_, ToNvml(domain),
        &mhz);
  return static_cast<int>(mhz);
}

int Device::MaxClock(ClockDomain domain) const {
  unsigned mhz = 0;
  Check("nvmlDeviceGetMaxClockInfo", Describe(), Api().device_get_max_clock_info, handle_,
        ToNvml(domain), &mhz);
  return static_cast<int>(mhz);
}

ThrottleReasons Device::CurrentThrottleReasons() const {
  unsigned long long mask = 0;
  Check("nvmlDeviceGetCurrentClocksThrottleReasons", Describe(), Api().device_get_throttle_reasons,
        handle_, &mask);
  return {mask};
}

unsigned Device::TemperatureC() const {
  unsigned celsius = 0;
  Check("nvmlDeviceGetTemperature", Describe(), Api().device_get_temperature, handle_,
        NVML_TEMPERATURE_GPU, &celsius);
  return celsius;
}

Utilization Device::GetUtilization() const {
  nvmlUtilization_t u = {};
  Check("nvmlDeviceGetUtilizationRates", Describe(), Api().device_get_utilization_rates, handle_,
        &u);
  return {u.gpu, u.memory};
}

namespace {

void RefuseMig(const Device& d, const char* what) {
  if (!d.mig_enabled()) return;
  throw MigError("cannot " + std::string(what) + " of " + d.Describe() +
                 ": it is in MIG mode, and joulepipe controls whole GPUs only: disable MIG "
                 "(`nvidia-smi -i " +
                 std::to_string(d.nvml_index()) + " -mig 0` as root, then reset the GPU)");
}

}  // namespace

void Device::SetLockedClocks(int min_mhz, int max_mhz) const {
  RefuseMig(*this, "lock the clocks");
  if (min_mhz <= 0 || max_mhz < min_mhz) {
    throw GpuArgumentError("cannot lock the SM clock of " + Describe() + " to [" +
                           std::to_string(min_mhz) + ", " + std::to_string(max_mhz) +
                           "] MHz: need 0 < min <= max");
  }
  Check("nvmlDeviceSetGpuLockedClocks", Describe(), Api().device_set_locked_clocks, handle_,
        static_cast<unsigned>(min_mhz), static_cast<unsigned>(max_mhz));
}

void Device::ResetLockedClocks() const {
  RefuseMig(*this, "reset the locked clocks");
  Check("nvmlDeviceResetGpuLockedClocks", Describe(), Api().device_reset_locked_clocks, handle_);
}

void Device::SetPowerLimit(double watts) const {
  RefuseMig(*this, "set the power limit");
  const PowerLimits limits = GetPowerLimits();
  // Compare in milliwatts, NVML's unit, so that a limit read back in watts
  // is always accepted.
  const double mw = std::round(watts * 1e3);
  if (!std::isfinite(watts) || mw < std::round(limits.min_w * 1e3) ||
      mw > std::round(limits.max_w * 1e3)) {
    throw GpuArgumentError("power limit " + Watts(watts) + " for " + Describe() +
                           " is outside the range it accepts, [" + Watts(limits.min_w) + ", " +
                           Watts(limits.max_w) + "]");
  }
  Check("nvmlDeviceSetPowerManagementLimit", Describe(), Api().device_set_power_limit, handle_,
        static_cast<unsigned>(mw));
}

void Device::ResetPowerLimit() const {
  RefuseMig(*this, "reset the power limit");
  unsigned def = 0;
  Check("nvmlDeviceGetPowerManagementDefaultLimit", Describe(),
        Api().device_get_power_default_limit, handle_, &def);
  Check("nvmlDeviceSetPowerManagementLimit", Describe(), Api().device_set_power_limit, handle_,
        def);
}

void Device::SetMemoryLockedClocks(int min_mhz, int max_mhz) const {
  RefuseMig(*this, "lock the memory clocks");
  if (min_mhz <= 0 || max_mhz < min_mhz) {
    throw GpuArgumentError("cannot lock the memory clock of " + Describe() + " to [" +
                           std::to_string(min_mhz) + ", " + std::to_string(max_mhz) +
                           "] MHz: need 0 < min <= max");
  }
  Check("nvmlDeviceSetMemoryLockedClocks", Describe(), Api().device_set_memory_locked_clocks,
        handle_, static_cast<unsigned>(min_mhz), static_cast<unsigned>(max_mhz));
}

void Device::ResetMemoryLockedClocks() const {
  RefuseMig(*this, "reset the memory locked clocks");
  Check("nvmlDeviceResetMemoryLockedClocks", Describe(), Api().device_reset_memory_locked_clocks,
        handle_);
}

bool Device::PersistenceMode() const {
  nvmlEnableState_t mode = NVML_FEATURE_DISABLED;
  Check("nvmlDeviceGetPersistenceMode", Describe(), Api().device_get_persistence_mode, handle_,
        &mode);
  return mode == NVML_FEATURE_ENABLED;
}

void Device::SetPersistenceMode(bool enabled) const {
  Check("nvmlDeviceSetPersistenceMode", Describe(), Api().device_set_persistence_mode, handle_,
        enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED);
}

}  // namespace joulepipe::gpu

// One NVIDIA GPU, read and controlled through NVML (nvml.hpp).
//
// A Device is a cheap value: the NVML handle plus the identity read when it
// was opened (indices, name, UUID, architecture, MIG mode). Copy it freely.
// Handles stay valid for the life of the process, since NVML stays
// initialised (nvml.hpp). All member functions are const and may be called
// from several threads at once (NVML is thread-safe).
//
// Errors: every NVML failure throws NvmlError (error.hpp) carrying NVML's
// code, the function name, nvmlErrorString's text and the device; setters
// throw NvmlPermissionError when the caller may not change the GPU, and
// MigError on a GPU in MIG mode. Where a caller has to branch on "the device
// cannot do this" (no energy counter, no power field values) the result is
// an std::optional or says which source answered, instead of an exception.
//
// Units: MHz for clocks; watts (double) for power with the raw NVML
// milliwatts beside; joules (double) for energy with the raw millijoules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "joulepipe/gpu/nvml_api.hpp"

namespace joulepipe::gpu {

// ---- Readings ------------------------------------------------------------------

// The GPU's total energy counter (nvmlDeviceGetTotalEnergyConsumption): energy
// since the driver was loaded, monotonic; Volta and newer. Subtract two
// readings for a window's energy.
struct EnergyReading {
  std::uint64_t millijoules = 0;
  double joules() const { return static_cast<double>(millijoules) * 1e-3; }
};

// Where a power figure came from.
enum class PowerSource {
  kFieldInstant,  // field value NVML_FI_DEV_POWER_INSTANT (instantaneous)
  kFieldAverage,  // field value NVML_FI_DEV_POWER_AVERAGE (averaged over ~1 s)
  kPowerUsage,    // nvmlDeviceGetPowerUsage (fallback: averaged over ~1 s on
                  // Ampere and newer, near-instant on older GPUs)
};
// "field NVML_FI_DEV_POWER_INSTANT", "field NVML_FI_DEV_POWER_AVERAGE",
// "nvmlDeviceGetPowerUsage".
std::string_view PowerSourceName(PowerSource source);

struct PowerReading {
  std::uint32_t milliwatts = 0;
  PowerSource source = PowerSource::kPowerUsage;
  double watts() const { return static_cast<double>(milliwatts) * 1e-3; }
};

// All in watts. current = nvmlDeviceGetPowerManagementLimit, default = the
// limit ResetPowerLimit restores, min/max = the range SetPowerLimit accepts,
// enforced = the limit in force (the lowest of all limits, e.g. also an
// in-band or out-of-band cap).
struct PowerLimits {
  double current_w = 0;
  double default_w = 0;
  double min_w = 0;
  double max_w = 0;
  double enforced_w = 0;
};

enum class ClockDomain { kGraphics, kSm, kMemory };

// Clock throttle ("clocks event") reasons, NVML's bit mask.
struct ThrottleReasons {
  std::uint64_t mask = 0;
  // Names of the set bits, lowest bit first: "gpu_idle",
  // "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
  // "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
  // "hw_power_brake_slowdown", "display_clock_setting"; unknown bits as
  // "unknown_0x<hex bit>". Empty when none is set.
  std::vector<std::string> Names() const;
};

struct Utilization {
  unsigned gpu_percent = 0;     // time a kernel ran, last sample period
  unsigned memory_percent = 0;  // time device memory was read or written
};

// ---- Device ----------------------------------------------------------------------

class Device {
 public:
  Device() = default;  // an empty value; only assign to it

  // Identity, read when opened (never throws).
  int visible_index() const { return visible_index_; }  // CUDA's index (-1: not visible)
  unsigned nvml_index() const { return nvml_index_; }
  const std::string& name() const { return name_; }  // e.g. "NVIDIA H100 80GB HBM3"
  const std::string& uuid() const { return uuid_; }  // "GPU-..."
  // "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell" or "unknown (N)";
  // "unknown" when NVML cannot tell.
  const std::string& architecture() const { return architecture_; }
  bool mig_enabled() const { return mig_enabled_; }  // current MIG mode
  // "GPU <nvml index> (<uuid>)": how messages name the device.
  std::string Describe() const;
  nvmlDevice_t handle() const { return handle_; }

  // ---- Energy and power ----
  // The total energy counter; nullopt when the GPU has none
  // (NVML_ERROR_NOT_SUPPORTED: pre-Volta, some virtualised GPUs). Throws
  // NvmlError for any other failure (GPU lost, ...).
  std::optional<EnergyReading> ReadEnergy() const;
  // Whether ReadEnergy() gives readings (one probe; throws as ReadEnergy).
  bool HasEnergyCounter() const;
  // Instantaneous power: field NVML_FI_DEV_POWER_INSTANT, falling back to
  // nvmlDeviceGetPowerUsage when the driver lacks nvmlDeviceGetFieldValues or
  // the field is not supported. `source` says which answered.
  PowerReading InstantPower() const;
  // Power averaged over ~1 s: field NVML_FI_DEV_POWER_AVERAGE, same fallback.
  PowerReading AveragePower() const;
  PowerLimits GetPowerLimits() const;

  // ---- Clocks (MHz) ----
  // Supported memory clocks, highest first.
  std::vector<int> SupportedMemoryClocks() const;
  // Supported graphics (= SM) clocks at memory clock `memory_mhz`, highest first.
  std::vector<int> SupportedGraphicsClocks(int memory_mhz) const;
  // Supported SM clocks at the highest supported memory clock, highest first:
  // the clocks joulepipe plans with.
  std::vector<int> SupportedSmClocks() const;
  int CurrentClock(ClockDomain domain) const;
  int MaxClock(ClockDomain domain) const;
  ThrottleReasons CurrentThrottleReasons() const;

  // ---- Other state ----
  unsigned TemperatureC() const;
  Utilization GetUtilization() const;

  // ---- Control (needs root or the daemon; refused on a GPU in MIG mode) ----
  // Locks the SM clock to [min_mhz, max_mhz] (nvmlDeviceSetGpuLockedClocks).
  // GpuArgumentError unless 0 < min_mhz <= max_mhz.
  void SetLockedClocks(int min_mhz, int max_mhz) const;
  void ResetLockedClocks() const;
  // GpuArgumentError unless watts lies in [min_w, max_w] of GetPowerLimits()
  // (the message gives the range). Rounded to whole milliwatts.
  void SetPowerLimit(double watts) const;
  // Back to the default limit.
  void ResetPowerLimit() const;
  // Locks the memory clock to [min_mhz, max_mhz] (Ampere and newer;
  // nvmlDeviceSetMemoryLockedClocks). GpuArgumentError unless
  // 0 < min_mhz <= max_mhz; NVML's own error for an older GPU.
  void SetMemoryLockedClocks(int min_mhz, int max_mhz) const;
  void ResetMemoryLockedClocks() const;
  // Persistence mode (the driver stays loaded without clients).
  bool PersistenceMode() const;
  void SetPersistenceMode(bool enabled) const;

 private:
  friend class DeviceOpener;
  nvmlDevice_t handle_ = nullptr;
  int visible_index_ = -1;
  unsigned nvml_index_ = 0;
  std::string name_;
  std::string uuid_;
  std::string architecture_;
  bool mig_enabled_ = false;
};

// ---- Listing ------------------------------------------------------------------------

enum class MigPolicy {
  kRefuse,  // throw MigError if a visible GPU is in MIG mode (for control/measurement)
  kList,    // list such GPUs too, mig_enabled() = true (for `joulepipe gpus`)
};

struct DeviceList {
  std::vector<Device> devices;  // visible order; visible_index() = position
  // Why CUDA_VISIBLE_DEVICES parsing stopped early, "" if it did not
  // (VisibleDevices::stopped, visible_devices.hpp).
  std::string visible_devices_note;
};

// The devices CUDA_VISIBLE_DEVICES makes visible (visible_devices.hpp has the
// rules), opened through Nvml(). Throws NvmlUnavailableError, NvmlError,
// MigError (a MIG-... entry; or, with kRefuse, a visible GPU in MIG mode,
// naming it and how to disable MIG: `nvidia-smi -i N -mig 0`).
DeviceList ListVisibleDevices(MigPolicy mig = MigPolicy::kRefuse);

// Every NVML device, ignoring CUDA_VISIBLE_DEVICES (visible_index() = -1),
// MIG or not. For tools that manage the whole node (the daemon).
std::vector<Device> ListAllDevices();

// The device with NVML index `nvml_index` (visible_index() = -1), opened
// alone. Throws GpuArgumentError ("no GPU with NVML index 7 (this node has
// 2)") when there is none.
Device DeviceByNvmlIndex(int nvml_index);

// NVML's name of an architecture code, as Device::architecture().
std::string ArchitectureName(unsigned nvml_architecture);

}  // namespace joulepipe::gpu

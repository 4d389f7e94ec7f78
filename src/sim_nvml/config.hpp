// Configuration of the simulated NVML library (docs/sim-nvml.md).
//
// Sources, later overriding earlier:
//   1. built-in default: one a100-sxm4-80gb, no permissions, no faults;
//   2. the JSON file named by JOULEPIPE_SIM_NVML_CONFIG;
//   3. JOULEPIPE_SIM_NVML_GPU (GPU type of every device) and
//      JOULEPIPE_SIM_NVML_COUNT (number of devices).
// The configuration is read on every nvmlInit that starts a session (init
// reference count 0 -> 1), so a process may change it between sessions.
#pragma once

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::sim_nvml {

inline constexpr int kMaxDevices = 64;

// A span of injected load, in seconds relative to the config epoch. Where no
// segment covers a time the device is idle (no context, draws idle_w). Where
// several do, the last one in the list wins.
struct LoadSegment {
  double start_s = 0;
  double end_s = 0;             // > start_s
  double utilization = 1;       // share of time a kernel runs, [0, 1]
  double compute_fraction = 1;  // beta of physics::Work, [0, 1]
  double activity = 1;          // dynamic-power scale of physics::Work, >= 0
};

struct Faults {
  std::optional<double> gpu_lost_at_s;        // from then on: NVML_ERROR_GPU_IS_LOST
  std::set<std::string> unknown_error;        // function names -> NVML_ERROR_UNKNOWN
  bool energy_counter_not_supported = false;  // as before Volta
  bool field_values_not_supported = false;    // every field NOT_SUPPORTED, as on old drivers
};

struct DeviceConfig {
  const physics::GpuSpec* gpu = nullptr;  // from physics::FindGpu, never null once loaded
  std::string uuid;                       // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  unsigned architecture = 0;              // NVML_DEVICE_ARCH_*
  bool mig_capable = false;
  bool mig_enabled = false;
  std::vector<LoadSegment> load;
  Faults faults;
  // Clocks while waiting ("wait" in the config; docs/sim-nvml.md): the
  // blocked power at the GPU's lowest clock (blocked power then runs
  // linearly from it to p_block_w at the highest clock; NaN = p_block_w at
  // every clock, the catalogue's model), and how long after the call a
  // locked-clock change takes effect.
  double blocked_w_at_min_clock = NAN;
  double clock_switch_s = 0;
};

enum class PowerReading { kAverage, kInstant };

struct Config {
  std::vector<DeviceConfig> devices;                    // 1..kMaxDevices
  double epoch_unix_s = 0;                              // energy counter integrates power from here
  double energy_period_s = 0.1;                         // counter update granularity (> 0)
  PowerReading power_reading = PowerReading::kAverage;  // nvmlDeviceGetPowerUsage
  bool allow_clocks = false;                            // locked graphics and memory clocks
  bool allow_power_limit = false;                       // permission for the power-limit setter
  bool allow_persistence_mode = false;                  // the persistence-mode setter
  std::string state_file;                               // "" = state is per process
  std::string call_log;                                 // "" = setter calls are not logged
  int init_error = 0;                                   // nvmlReturn_t nvmlInit returns; 0 = none
  std::string driver_version = "550.54.15";
  int cuda_driver_version = 12040;
};

// Reads the configuration from the environment (see top). Throws
// model::InputError (naming the file and field) on an invalid configuration.
Config LoadConfig();

// Parses a configuration document (the file's contents); `source` names it in
// errors. Environment overrides are not applied.
Config ParseConfig(const std::string& json_text, const std::string& source);

// Default UUID of device `index` of type `gpu_id`: a hash of both, so it is
// the same in every process.
std::string DefaultUuid(int index, const std::string& gpu_id);

// NVML_DEVICE_ARCH_* of a catalog GPU type; 0xffffffff (unknown) if none.
unsigned ArchitectureOf(const physics::GpuSpec& gpu);

// The machine's boot time (whole seconds since the Unix epoch, /proc/stat
// btime): the same for every process, the default counter epoch.
double BootTimeUnixS();

}  // namespace joulepipe::sim_nvml

// What one simulated device does at a point in time, and the energy it has
// used since the config epoch (docs/sim-nvml.md, "What is modelled").
//
// Times are absolute seconds on CLOCK_REALTIME (Unix time), so every process
// that reads the same configuration and state file computes the same values.
//
//   Settings. The device settings (locked clocks, power limit) form a step
//             function of time: a base (settings in force from base_t, with
//             the exact energy used up to then) and the changes after it.
//   Power.    Idle (no load segment): idle_w at the idle clock. Under a load
//             segment {u, beta, a}: the busy clock is the locked max clock
//             (or the GPU's max), capped by the power limit through
//             physics::Run and rounded down to a supported clock; the power is
//             u * physics::Power(gpu, a, clock) + (1 - u) * BlockedPowerW(clock)
//             (between kernels the GPU waits at its clock, like a P2P wait).
//             A load override in the settings (nvmlJoulepipeSimSetLoad)
//             replaces the schedule: idle; blocked (BlockedPowerW at the
//             busy clock); busy with {1, beta, a}.
//   Switch.   A locked-clock change takes effect clock_switch_s after the
//             call (0 by default); a change of any setting made meanwhile
//             waits behind it (settings change in call order).
//   Energy.   The exact integral of that piecewise-constant power from the
//             epoch (or the base) to t; the NVML counter publishes it at the
//             last update tick epoch + k * period.
#pragma once

#include <cmath>
#include <vector>

#include "config.hpp"
#include "joulepipe/sim_nvml/ext.hpp"

namespace joulepipe::sim_nvml {

struct Settings {
  bool locked = false;          // locked graphics clocks set
  unsigned locked_min_mhz = 0;  // as requested (min <= max); used only if locked
  unsigned locked_max_mhz = 0;
  unsigned power_limit_mw = 0;      // 0 = the GPU's default limit (tdp_w)
  bool mem_locked = false;          // locked memory clocks set
  unsigned mem_locked_min_mhz = 0;  // as requested (min <= max); used only if mem_locked
  unsigned mem_locked_max_mhz = 0;
  bool persistence_mode = false;  // driver persistence mode (no effect on power)
  // In-process load override (nvmlJoulepipeSimSetLoad): -1 follows the
  // config's load schedule; otherwise sim_nvml::kLoadIdle, kLoadBlocked or
  // kLoadBusy (joulepipe/sim_nvml/ext.hpp), with the work's beta and
  // activity when busy.
  int load_state = -1;
  double load_compute_fraction = 1;
  double load_activity = 1;

  bool operator==(const Settings&) const = default;
};

struct SettingsChange {
  double t = 0;  // Unix time from which `settings` is in force
  Settings settings;
  // Cache: the exact energy from the epoch to t (J), filled in when the
  // change is recorded in process (DeviceCall::SetSettings); NaN when
  // unknown (e.g. read back from the state file). Readings start from the
  // latest cached change before them, so they cost O(log n), not O(n).
  double energy_j = NAN;
};

// The settings history of one device (what the state file stores).
// Invariant: changes are sorted by t and all are later than base_t.
struct DeviceHistory {
  double base_t = NAN;       // NaN: no base; the integral starts at the epoch
  double base_energy_j = 0;  // energy from the epoch to base_t (when base_t is set)
  Settings base;             // settings in force before the first change
  std::vector<SettingsChange> changes;

  const Settings& Current() const { return changes.empty() ? base : changes.back().settings; }
  const Settings& At(double t) const;
  // Records `s` from time t (t >= the last change; equal settings are dropped).
  void Set(double t, const Settings& s);
};

// The device's state at one instant.
struct Operating {
  bool idle = true;        // no load segment covers the instant
  double utilization = 0;  // of the load segment
  double compute_fraction = 0;
  double sm_mhz = 0;          // current SM (= graphics) clock
  double power_w = 0;         // instantaneous power
  bool power_capped = false;  // the power limit holds the clock below the requested one
  bool locked = false;
};

// Clock range the settings allow, snapped to supported clocks: max is the
// highest supported clock <= the locked max (or the GPU's max), min the
// lowest supported clock >= the locked min (or the GPU's min), <= max.
struct ClockRange {
  double min_mhz = 0;
  double max_mhz = 0;
};
ClockRange AllowedClocks(const physics::GpuSpec& gpu, const Settings& s);

// Highest supported SM clock <= mhz (the lowest supported clock if none).
double SnapDown(const physics::GpuSpec& gpu, double mhz);

double PowerLimitW(const physics::GpuSpec& gpu, const Settings& s);

// Supported memory clocks, highest first: the catalog's single memory_mhz
// (A100 and H100 boards list one memory clock).
std::vector<unsigned> SupportedMemoryClocks(const physics::GpuSpec& gpu);

// The memory clock the settings give: unlocked, the highest supported one;
// locked, the highest supported clock <= the locked max, or, if none, the
// lowest supported one (the request is clamped to the supported range, as
// for graphics clocks). With one supported clock this is always memory_mhz.
unsigned MemoryClockMhz(const physics::GpuSpec& gpu, const Settings& s);

// Share of the board power drawn by the memory subsystem at the instant
// `op` (docs/sim-nvml.md, "Memory power"): kIdleMemoryShare of idle_w plus
// the memory-bound share (1 - beta) of the busy power above idle_w, over
// the board power. In [0, 1].
inline constexpr double kIdleMemoryShare = 0.66;
double MemoryPowerShare(const physics::GpuSpec& gpu, const Operating& op);

Operating OperatingAt(const DeviceConfig& dev, double epoch_unix_s, const Settings& s, double t);

// Blocked power (W) at SM clock `mhz`: p_block_w, or, with the config's
// blocked_w_at_min_clock, linear from that at the lowest clock to p_block_w
// at the highest.
double BlockedPowerW(const DeviceConfig& dev, double mhz);

// Exact energy (J) used between the epoch and t (0 for t <= epoch).
double EnergyJ(const DeviceConfig& dev, double epoch_unix_s, const DeviceHistory& h, double t);

// The counter value published at t: EnergyJ at the last tick
// epoch + floor((t - epoch) / period) * period, in whole millijoules.
unsigned long long CounterMj(const DeviceConfig& dev, double epoch_unix_s, double period_s,
                             const DeviceHistory& h, double t);

// Mean power (W) over [t - window, t] (the instant power when that starts
// before the epoch).
double AveragePowerW(const DeviceConfig& dev, double epoch_unix_s, const DeviceHistory& h, double t,
                     double window_s);

// Fills in changes.back().energy_j (the exact energy up to its time) if it
// is not known yet.
void CacheLastEnergy(const DeviceConfig& dev, double epoch_unix_s, DeviceHistory& h);

// Bounds the history: when it holds more than `max_changes`, folds the
// changes older than `keep_after` into the base (exact energy up to the
// newest folded change), keeping at least max_changes / 2. Energy for times
// >= the new base_t is unchanged. Amortised O(1) per change at any change
// rate: it folds only once the foldable changes are at least half of them.
void Compact(const DeviceConfig& dev, double epoch_unix_s, DeviceHistory& h, size_t max_changes,
             double keep_after);

}  // namespace joulepipe::sim_nvml

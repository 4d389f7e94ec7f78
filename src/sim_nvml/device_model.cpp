#include "device_model.hpp"

#include <algorithm>
#include <iterator>

namespace joulepipe::sim_nvml {
namespace {

// The load segment in force at t (absolute), or null: the last covering one.
const LoadSegment* SegmentAt(const DeviceConfig& dev, double epoch, double t) {
  const LoadSegment* found = nullptr;
  for (const LoadSegment& s : dev.load)
    if (t >= epoch + s.start_s && t < epoch + s.end_s) found = &s;
  return found;
}

}  // namespace

const Settings& DeviceHistory::At(double t) const {
  // The last change with c.t <= t (changes are sorted by t).
  const auto after = std::upper_bound(changes.begin(), changes.end(), t,
                                      [](double x, const SettingsChange& c) { return x < c.t; });
  return after == changes.begin() ? base : std::prev(after)->settings;
}

void DeviceHistory::Set(double t, const Settings& s) {
  if (s == Current()) return;
  if (!changes.empty()) t = std::max(t, changes.back().t);
  if (!std::isnan(base_t)) t = std::max(t, base_t);
  changes.push_back({t, s});
}

double SnapDown(const physics::GpuSpec& gpu, double mhz) {
  const double hi = gpu.max_sm_mhz, step = gpu.sm_step_mhz > 0 ? gpu.sm_step_mhz : 1;
  if (mhz >= hi) return hi;
  const double lowest = hi - std::floor((hi - gpu.min_sm_mhz) / step) * step;
  if (mhz <= lowest) return lowest;
  return hi - std::ceil((hi - mhz) / step - 1e-9) * step;
}

ClockRange AllowedClocks(const physics::GpuSpec& gpu, const Settings& s) {
  ClockRange r;
  const double step = gpu.sm_step_mhz > 0 ? gpu.sm_step_mhz : 1;
  const double lowest = SnapDown(gpu, gpu.min_sm_mhz);
  r.max_mhz = s.locked ? SnapDown(gpu, s.locked_max_mhz) : gpu.max_sm_mhz;
  if (!s.locked) {
    r.min_mhz = lowest;
  } else {
    double m = SnapDown(gpu, s.locked_min_mhz);
    if (m < s.locked_min_mhz && m + step <= gpu.max_sm_mhz) m += step;  // round up
    r.min_mhz = std::clamp(m, lowest, r.max_mhz);
  }
  return r;
}

double PowerLimitW(const physics::GpuSpec& gpu, const Settings& s) {
  return s.power_limit_mw > 0 ? s.power_limit_mw / 1000.0 : gpu.tdp_w;
}

std::vector<unsigned> SupportedMemoryClocks(const physics::GpuSpec& gpu) {
  return {static_cast<unsigned>(gpu.memory_mhz)};
}

unsigned MemoryClockMhz(const physics::GpuSpec& gpu, const Settings& s) {
  const std::vector<unsigned> clocks = SupportedMemoryClocks(gpu);  // highest first
  if (!s.mem_locked) return clocks.front();
  for (unsigned mhz : clocks)
    if (mhz <= s.mem_locked_max_mhz) return mhz;
  return clocks.back();
}

double MemoryPowerShare(const physics::GpuSpec& gpu, const Operating& op) {
  if (!(op.power_w > 0)) return 0;
  const double busy_above_idle =
      std::max(0.0, op.power_w - gpu.idle_w) * op.utilization * (1.0 - op.compute_fraction);
  const double memory_w = kIdleMemoryShare * gpu.idle_w + busy_above_idle;
  return std::clamp(memory_w / op.power_w, 0.0, 1.0);
}

double BlockedPowerW(const DeviceConfig& dev, double mhz) {
  const physics::GpuSpec& gpu = *dev.gpu;
  if (std::isnan(dev.blocked_w_at_min_clock) || gpu.max_sm_mhz <= gpu.min_sm_mhz)
    return gpu.p_block_w;
  const double low = std::min(dev.blocked_w_at_min_clock, gpu.p_block_w);
  const double x = std::clamp((mhz - gpu.min_sm_mhz) / (gpu.max_sm_mhz - gpu.min_sm_mhz), 0.0, 1.0);
  return low + (gpu.p_block_w - low) * x;
}

Operating OperatingAt(const DeviceConfig& dev, double epoch, const Settings& s, double t) {
  const physics::GpuSpec& gpu = *dev.gpu;
  const ClockRange range = AllowedClocks(gpu, s);
  Operating op;
  op.locked = s.locked;
  LoadSegment override_segment;
  const LoadSegment* seg = nullptr;
  if (s.load_state < 0) seg = SegmentAt(dev, epoch, t);
  if (s.load_state == sim_nvml::kLoadBlocked || (seg != nullptr && seg->utilization == 0)) {
    // Waiting on a peer (or a segment with no kernel running) at the clock
    // it would run at, uncapped (blocked power is below every limit),
    // drawing the blocked power of that clock.
    op.idle = false;
    op.sm_mhz = range.max_mhz;
    op.power_w = BlockedPowerW(dev, op.sm_mhz);
    return op;
  }
  if (s.load_state == sim_nvml::kLoadBusy) {
    override_segment = {0, 0, 1.0, s.load_compute_fraction, s.load_activity};
    seg = &override_segment;
  }
  if (!seg) {
    // Idle: the clock falls to the lowest allowed one; the board draws idle_w.
    op.sm_mhz = range.min_mhz;
    op.power_w = gpu.idle_w;
    return op;
  }
  op.idle = false;
  op.utilization = seg->utilization;
  op.compute_fraction = seg->compute_fraction;
  const physics::Work work{1.0, seg->compute_fraction, seg->activity};
  const physics::OperatingPoint point = physics::Run(gpu, work, range.max_mhz, PowerLimitW(gpu, s));
  op.sm_mhz = range.max_mhz;
  if (point.power_capped) {
    op.power_capped = true;
    op.sm_mhz = SnapDown(gpu, point.effective_mhz);
  }
  const double busy_w = physics::Power(gpu, seg->activity, op.sm_mhz);
  op.power_w = seg->utilization * busy_w + (1.0 - seg->utilization) * BlockedPowerW(dev, op.sm_mhz);
  return op;
}

namespace {

// Integral of power over [a, b] (a <= b) with the settings of h. Linear in
// the number of changes (the in-process load override may record thousands
// of changes per second, docs/sim-nvml.md).
double Integrate(const DeviceConfig& dev, double epoch, const DeviceHistory& h, double a,
                 double b) {
  if (b <= a) return 0;
  std::vector<double> cuts{a, b};
  for (const LoadSegment& s : dev.load) {
    for (double x : {epoch + s.start_s, epoch + s.end_s})
      if (x > a && x < b) cuts.push_back(x);
  }
  // Changes are sorted by t: the first one after a, and the settings in
  // force at a.
  const auto first = std::upper_bound(h.changes.begin(), h.changes.end(), a,
                                      [](double t, const SettingsChange& c) { return t < c.t; });
  for (auto it = first; it != h.changes.end() && it->t < b; ++it) cuts.push_back(it->t);
  std::sort(cuts.begin(), cuts.end());
  const Settings* settings = first == h.changes.begin() ? &h.base : &std::prev(first)->settings;
  auto next = first;
  double joules = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double x = cuts[i], y = cuts[i + 1];
    while (next != h.changes.end() && next->t <= x) settings = &(next++)->settings;
    if (y <= x) continue;
    // Power is constant on (x, y); sample it at the piece's start (segments
    // and settings are right-continuous: in force from their start on).
    joules += OperatingAt(dev, epoch, *settings, x).power_w * (y - x);
  }
  return joules;
}

}  // namespace

double EnergyJ(const DeviceConfig& dev, double epoch, const DeviceHistory& h, double t) {
  // From the latest change strictly before t, when its energy is cached.
  const auto next = std::lower_bound(h.changes.begin(), h.changes.end(), t,
                                     [](const SettingsChange& c, double x) { return c.t < x; });
  if (next != h.changes.begin()) {
    const SettingsChange& c = *std::prev(next);
    if (!std::isnan(c.energy_j) && c.t >= epoch)
      return c.energy_j + Integrate(dev, epoch, h, c.t, t);
  }
  if (!std::isnan(h.base_t) && h.base_t >= epoch && t >= h.base_t)
    return h.base_energy_j + Integrate(dev, epoch, h, h.base_t, t);
  if (t <= epoch) return 0;
  return Integrate(dev, epoch, h, epoch, t);
}

unsigned long long CounterMj(const DeviceConfig& dev, double epoch, double period_s,
                             const DeviceHistory& h, double t) {
  if (t <= epoch) return 0;
  const double tick = epoch + std::floor((t - epoch) / period_s) * period_s;
  return static_cast<unsigned long long>(std::floor(EnergyJ(dev, epoch, h, tick) * 1000.0));
}

double AveragePowerW(const DeviceConfig& dev, double epoch, const DeviceHistory& h, double t,
                     double window_s) {
  if (t - window_s < epoch) return OperatingAt(dev, epoch, h.At(t), t).power_w;
  return (EnergyJ(dev, epoch, h, t) - EnergyJ(dev, epoch, h, t - window_s)) / window_s;
}

void CacheLastEnergy(const DeviceConfig& dev, double epoch, DeviceHistory& h) {
  if (h.changes.empty() || !std::isnan(h.changes.back().energy_j)) return;
  // EnergyJ at the change's own time does not include the change's piece.
  h.changes.back().energy_j = EnergyJ(dev, epoch, h, h.changes.back().t);
}

void Compact(const DeviceConfig& dev, double epoch, DeviceHistory& h, size_t max_changes,
             double keep_after) {
  if (h.changes.size() <= max_changes) return;
  // Changes older than keep_after, keeping at least max_changes / 2.
  const size_t old_ones = static_cast<size_t>(
      std::lower_bound(h.changes.begin(), h.changes.end(), keep_after,
                       [](const SettingsChange& c, double x) { return c.t < x; }) -
      h.changes.begin());
  const size_t fold = std::min(old_ones, h.changes.size() - max_changes / 2);
  // Erasing from the front is O(n): do it only when it removes at least half.
  if (fold == 0 || 2 * fold < h.changes.size()) return;
  const SettingsChange last = h.changes[fold - 1];
  if (last.t <= epoch) {
    // Before the epoch only the settings in force matter.
    h.base = last.settings;
    h.base_t = NAN;
    h.base_energy_j = 0;
  } else {
    const double e = EnergyJ(dev, epoch, h, last.t);
    h.base = last.settings;
    h.base_t = last.t;
    h.base_energy_j = e;
  }
  h.changes.erase(h.changes.begin(), h.changes.begin() + static_cast<long>(fold));
}

}  // namespace joulepipe::sim_nvml

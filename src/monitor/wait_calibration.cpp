#include "joulepipe/monitor/wait_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/monitor/monitor.hpp"

namespace joulepipe::monitor {
namespace {

using Steady = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void CheckCancel(const std::atomic<bool>* cancel) {
  if (cancel && cancel->load()) throw model::Cancelled("calibrate-wait: interrupted");
}

// Sleeps `seconds` in poll steps so that a cancel is seen quickly.
void Sleep(double seconds, const std::atomic<bool>* cancel) {
  const auto end = Steady::now() + std::chrono::duration_cast<Steady::duration>(
                                       std::chrono::duration<double>(seconds));
  for (auto now = Steady::now(); now < end; now = Steady::now()) {
    CheckCancel(cancel);
    std::this_thread::sleep_for(
        std::min<Steady::duration>(std::chrono::milliseconds(20), end - now));
  }
}

// Locks [mhz, mhz] and returns the seconds from the request until the GPU
// reports mhz as its SM clock.
double SwitchTo(gpu::ClockControl& control, const gpu::Device& device, int mhz,
                const WaitCalibrationOptions& o) {
  const auto start = Steady::now();
  control.SetLockedClocks(o.nvml_index, mhz, mhz);
  int now = device.CurrentClock(gpu::ClockDomain::kSm);
  while (now != mhz) {
    CheckCancel(o.cancel);
    const double took = std::chrono::duration<double>(Steady::now() - start).count();
    if (took > o.switch_timeout_s) {
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "calibrate-wait: GPU %d reports %d MHz %.1f s after its clocks were locked "
                    "at %d MHz; an idle GPU may not report locked clocks, so keep it waiting "
                    "while calibrating (calibrate-wait -- COMMAND), and check that it is not "
                    "power- or thermally capped",
                    o.nvml_index, now, took, mhz);
      throw gpu::GpuError(buf);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(o.poll_s));
    now = device.CurrentClock(gpu::ClockDomain::kSm);
  }
  return std::chrono::duration<double>(Steady::now() - start).count();
}

void CheckOptions(const WaitCalibrationOptions& o, const std::vector<int>& supported) {
  // Fields, not flags (docs/architecture.md, "Errors"): the CLI renames them.
  if (o.clocks_mhz.size() < 2)
    throw model::InputError("WaitCalibrationOptions::clocks_mhz",
                            "WaitCalibrationOptions::clocks_mhz needs at least 2 clocks, got " +
                                std::to_string(o.clocks_mhz.size()));
  for (int f : o.clocks_mhz)
    if (std::find(supported.begin(), supported.end(), f) == supported.end())
      throw model::InputError("WaitCalibrationOptions::clocks_mhz",
                              "WaitCalibrationOptions::clocks_mhz: " + std::to_string(f) +
                                  " MHz is not a supported SM clock of GPU " +
                                  std::to_string(o.nvml_index) + " (joulepipe gpus lists them)");
  if (!(o.dwell_s >= 2 * o.counter_period_s))
    throw model::InputError("WaitCalibrationOptions::dwell_s",
                            model::Format("WaitCalibrationOptions::dwell_s must be at least two "
                                          "energy-counter periods (%g s), got %g s",
                                          2 * o.counter_period_s, o.dwell_s));
  if (!(o.settle_s >= 0))
    throw model::InputError(
        "WaitCalibrationOptions::settle_s",
        model::Format("WaitCalibrationOptions::settle_s must be >= 0 s (got %g)", o.settle_s));
  if (!(o.switch_timeout_s > 0) || !(o.poll_s > 0))
    throw model::InputError("WaitCalibrationOptions::switch_timeout_s",
                            "WaitCalibrationOptions::switch_timeout_s and poll_s must be > 0");
}

}  // namespace

std::vector<int> SpreadClocks(const std::vector<int>& supported, int count) {
  if (count < 2) {
    throw model::InputError("SpreadClocks::count", "SpreadClocks::count must be at least 2 (got " +
                                                       std::to_string(count) + ")");
  }
  if (static_cast<int>(supported.size()) <= count) return supported;
  std::vector<int> out;
  const double step = static_cast<double>(supported.size() - 1) / (count - 1);
  for (int i = 0; i < count; ++i) {
    const int f = supported[static_cast<size_t>(std::lround(i * step))];
    if (out.empty() || out.back() != f) out.push_back(f);
  }
  return out;
}

WaitCalibration CalibrateWait(gpu::ClockControl& control, const WaitCalibrationOptions& o) {
  const std::vector<int> supported = control.SupportedSmClocks(o.nvml_index);
  CheckOptions(o, supported);
  std::vector<int> clocks = o.clocks_mhz;
  std::sort(clocks.rbegin(), clocks.rend());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  const int highest = clocks.front();

  const gpu::Device device = gpu::DeviceByNvmlIndex(o.nvml_index);
  MonitorOptions mo;
  mo.cpu = CpuMode::kOff;
  mo.counter_period_s = o.counter_period_s;
  mo.align_timeout_s = std::max(1.0, 3 * o.counter_period_s);
  std::vector<std::unique_ptr<GpuMeter>> meters;
  meters.push_back(NvmlGpuMeterByNvmlIndex(o.nvml_index));
  Monitor monitor(std::move(meters), mo);

  // Restores on every way out, exceptions included (Restore never throws).
  struct RestoreClocks {
    gpu::ClockControl& control;
    ~RestoreClocks() { control.Restore(); }
  } restore{control};

  WaitCalibration result;
  SwitchTo(control, device, highest, o);
  for (int f : clocks) {
    double down = 0;
    if (f != highest) {
      down = SwitchTo(control, device, f, o);
      result.down_s.push_back(down);
    }
    Sleep(o.settle_s, o.cancel);
    monitor.Begin("wait", Edges::kAligned);
    Sleep(o.dwell_s, o.cancel);
    const Measurement m = monitor.End("wait");
    const double watts = m.gpus.at(0).energy_j / m.duration_s;
    result.model.points.push_back({f, watts});
    result.window_s.push_back(m.duration_s);
    if (f != highest) result.up_s.push_back(SwitchTo(control, device, highest, o));
    if (o.progress) {
      char line[160];
      if (f == highest)
        std::snprintf(line, sizeof line, "%5d MHz  %7.2f W", f, watts);
      else
        std::snprintf(line, sizeof line, "%5d MHz  %7.2f W  (switch down %.1f ms, up %.1f ms)", f,
                      watts, down * 1e3, result.up_s.back() * 1e3);
      o.progress(line);
    }
  }
  result.model.switch_latency_s = std::max(Median(result.down_s), Median(result.up_s));
  if (result.model.switch_latency_s > model::kMaxSwitchLatencyS)
    throw gpu::GpuError("calibrate-wait: the median clock switch took " +
                        std::to_string(result.model.switch_latency_s) +
                        " s, more than any GPU takes; measure again on an unloaded node");
  result.model.gpu = device.name();
  result.model.load = o.load;
  result.model.source = "calibrate-wait";
  return result;
}

}  // namespace joulepipe::monitor

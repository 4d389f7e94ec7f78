// CalibrateWait: measures one GPU's wait model (model/wait_model.hpp), what
// `joulepipe calibrate-wait` runs: the power the GPU draws while it waits at
// each of a set of locked SM clocks, and how long a clock change takes.
//
// The routine only locks clocks and reads; keeping the GPU in its waiting
// state meanwhile (a spin-wait kernel, or a process blocked on a peer) is
// the caller's (calibrate-wait starts the command it is given for that).
//
// For each clock f, highest first, every clock entered from the highest one
// as a wait is entered from compute:
//   1. lock [max, max]; if the previous clock was lower, time that switch
//      (an "up" sample: the restore before compute);
//   2. lock [f, f] and time the switch (a "down" sample), from just before
//      the request until NVML reports f as the SM clock;
//   3. wait settle_s, then measure the mean power over dwell_s with the
//      energy counter (an aligned window: no edge error).
// switch_latency_s is the larger of the median down and the median up
// sample (the planner uses it both ways). Clocks are restored on every way
// out (the ClockControl's Restore).
//
// Errors: model::InputError for bad options (an unsupported clock, a dwell
// below two counter periods); gpu::GpuError from the control or NVML, and
// one naming the clock when the SM clock does not reach it within
// switch_timeout_s (an idle GPU may not report locked clocks: keep it
// waiting); model::Cancelled when *cancel becomes true (checked every poll).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/model/wait_model.hpp"

namespace joulepipe::monitor {

struct WaitCalibrationOptions {
  int nvml_index = 0;             // the GPU (NVML's numbering, as ClockControl's)
  std::vector<int> clocks_mhz;    // to measure (>= 2, supported clocks; any order)
  double settle_s = 0.5;          // after the switch, before the window
  double dwell_s = 2.0;           // the measured window per clock
  double counter_period_s = 0.1;  // NVML's energy-counter update period
  double switch_timeout_s = 2.0;  // the SM clock must reach a locked clock by then
  double poll_s = 2e-4;           // how often the SM clock is read while switching
  std::string load;               // how the GPU was kept waiting (into the model)
  // One line per measured clock, e.g. "1410 MHz  95.2 W  (down 4.9 ms)".
  std::function<void(const std::string&)> progress;
  const std::atomic<bool>* cancel = nullptr;
};

struct WaitCalibration {
  model::WaitModel model;        // points highest first; source "calibrate-wait"
  std::vector<double> down_s;    // switch samples, highest -> each lower clock
  std::vector<double> up_s;      // each lower clock -> highest
  std::vector<double> window_s;  // measured window per point
};

// The GPU's supported SM clocks spread over its range, highest first: the
// highest, the lowest and evenly spaced ones between (count >= 2; all of
// them when there are fewer).
std::vector<int> SpreadClocks(const std::vector<int>& supported_highest_first, int count);

WaitCalibration CalibrateWait(gpu::ClockControl& control, const WaitCalibrationOptions& options);

}  // namespace joulepipe::monitor

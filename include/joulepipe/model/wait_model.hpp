// WaitModel: what a GPU draws while it waits (pipeline bubbles, P2P waits,
// the gradient all-reduce), and what lowering its SM clock for the wait
// saves. Issue 15 item 3, "clocks while waiting".
//
// The model. A wait of g seconds at the default clock costs P_block x g (the
// accounting of docs/architecture.md). A calibrated model (`joulepipe calibrate-wait`
// measured it on the GPU: the blocked power at each locked SM clock and the
// clock-switch latency L) lowers the clock to the calibrated clock with the
// least power, f_w, when the wait is long enough to switch down and back:
//
//   g >= 2L + margin:  lowered for  g - L - margin  seconds (the switch down
//                      takes L; the restore is requested L + margin before
//                      the next compute, so it is in place in time), at
//                      P_low = max(0, P_block - (P(f_ref) - P(f_w))),
//                      f_ref the highest calibrated clock;
//   otherwise:         not lowered.
//
// The saving is applied as a difference to P_block (not as the calibrated
// power itself), so a profile's P_block and a calibration made with another
// load (a spin kernel, an idle context) stay consistent, and an uncalibrated
// model (no points) is exactly today's P_block x g: the predicted saving is 0
// until a GPU user calibrates.
//
// JSON (what calibrate-wait writes; version 1):
//   {"version":1, "kind":"wait_model", "gpu":"NVIDIA H200", "load":"spin",
//    "switch_latency_s":0.004, "margin_s":0.001,
//    "points":[{"frequency":1980,"blocked_w":121.5}, ...]}
// "gpu", "load" and "margin_s" (default kDefaultWaitMarginS) are optional;
// unknown fields are ignored.
#pragma once

#include <string>
#include <vector>

namespace joulepipe::model {

// The restore is requested this long before the next compute on top of the
// switch latency, so that timer and clock jitter do not slow the compute.
inline constexpr double kDefaultWaitMarginS = 1e-3;
// A saving below this share of the highest clock's blocked power is taken
// as none: it is within what a measurement resolves (energy-counter edges,
// the GPU's own power fluctuation), so lowering would be for nothing.
inline constexpr double kMinWaitSavingShare = 0.01;
// No GPU takes a second to switch its clock; larger values are a unit mistake.
inline constexpr double kMaxSwitchLatencyS = 1.0;

struct WaitPoint {
  int mhz = 0;           // locked SM clock
  double blocked_w = 0;  // GPU power while waiting at that clock (W)
};

struct WaitModel {
  double p_block_w = 0;           // power while waiting at the default clock (W)
  std::vector<WaitPoint> points;  // calibrated, highest clock first; empty: uncalibrated
  double switch_latency_s = 0;    // L: request to the new clock in effect
  double margin_s = kDefaultWaitMarginS;
  std::string gpu;                      // the GPU it was calibrated on (may be empty)
  std::string load;                     // "spin" | "idle" | "" (how it was measured)
  std::string source = "uncalibrated";  // the file, for messages and summaries

  bool calibrated() const { return !points.empty(); }
  // The clock to wait at: the calibrated clock with the least power, or 0
  // when lowering saves nothing (uncalibrated, or no clock draws at least
  // kMinWaitSavingShare less than the highest one).
  int wait_mhz() const;
  // P(f_ref) - P(f_w): what lowering saves per second (W); 0 when it is
  // below kMinWaitSavingShare of P(f_ref).
  double saving_w() const;
  // Power while lowered: max(0, p_block_w - saving_w()).
  double lowered_w() const;
  // Seconds of a g-second wait spent at the wait clock (0 when not lowered).
  double LoweredS(double gap_s) const;
  // Energy of one g-second wait (J): p_block_w x g - (p_block_w - lowered_w()) x LoweredS(g).
  double WaitEnergyJ(double gap_s) const;
  // When, after the wait began, the restore is requested: g - L - margin.
  double RestoreAfterS(double gap_s) const;
  // "calibrated (FILE: 1980 MHz 121.5 W -> 345 MHz 88.0 W, switch 4.0 ms)"
  // or "uncalibrated (blocked power independent of the clock: saving 0)".
  std::string Describe() const;
};

// The flat model: today's accounting, P_block x g for every wait.
WaitModel FlatWaitModel(double p_block_w);

// Throws InputError naming `source` and the field ("points[2].blocked_w")
// with an excerpt of the bad value. The result's p_block_w is 0: the caller
// sets the P_block it plans with.
WaitModel WaitModelFromJson(const std::string& text, const std::string& source);
WaitModel ReadWaitModelFile(const std::string& path);
std::string WaitModelToJson(const WaitModel& model);

}  // namespace joulepipe::model

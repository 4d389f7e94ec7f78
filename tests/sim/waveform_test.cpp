// The grid metrics of a power waveform (sim/waveform.hpp) on waveforms whose
// answers are known in closed form: a square wave (swing, ramp, its 0.5 Hz
// fundamental of 4/pi x half the swing), a sine above the band (nothing in
// it), the job's start and stop as padding; and the bins keep energy.

#include "joulepipe/sim/waveform.hpp"

#include "joulepipe/sim/grid_plan.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "joulepipe/model/error.hpp"

namespace joulepipe::sim {
namespace {

TEST(Waveform, AddSpreadsEnergyOverTheBinsItCovers) {
  Waveform w;
  w.dt_s = 0.01;
  w.Add(0.005, 0.02, 2.0);  // 100 W from 5 ms to 25 ms
  ASSERT_EQ(w.gpu_w.size(), 3u);
  EXPECT_NEAR(w.gpu_w[0], 50, 1e-9);
  EXPECT_NEAR(w.gpu_w[1], 100, 1e-9);
  EXPECT_NEAR(w.gpu_w[2], 50, 1e-9);
  EXPECT_NEAR(w.EnergyJ(), 2.0, 1e-12);
  w.Add(0.0, 0.0, 5.0);  // no duration, no power
  EXPECT_NEAR(w.EnergyJ(), 2.0, 1e-12);
}

// 1 s at 1000 W, 1 s at 200 W, 32 times, in 10 ms bins.
Waveform SquareWave() {
  Waveform w;
  w.dt_s = 0.01;
  for (int k = 0; k < 64; ++k) w.Add(k * 1.0, 1.0, k % 2 == 0 ? 1000.0 : 200.0);
  return w;
}

TEST(Waveform, SquareWaveMetrics) {
  const GridMetrics m = MeasureGrid(SquareWave(), GridOptions{});
  EXPECT_NEAR(m.duration_s, 64, 1e-9);
  EXPECT_NEAR(m.peak_w, 1000, 1e-9);
  EXPECT_NEAR(m.trough_w, 200, 1e-9);
  EXPECT_NEAR(m.mean_w, 600, 1e-9);
  EXPECT_NEAR(m.energy_j, 600 * 64, 1e-6);
  EXPECT_NEAR(m.swing_w, 800, 1e-9);
  // Two consecutive 0.1 s windows on either side of a step: 800 W in 0.1 s.
  EXPECT_NEAR(m.ramp_w_per_s, 8000, 1e-6);
  // The fundamental: 0.5 Hz, amplitude 4/pi x 400 W; the band holds nearly
  // all of the square wave's 400 W RMS (harmonics above 20 Hz are < 1 %).
  EXPECT_NEAR(m.band_peak_hz, 0.5, 0.02);
  EXPECT_NEAR(m.band_peak_w, 4 / std::numbers::pi * 400, 0.03 * 509);
  EXPECT_NEAR(m.band_rms_w, 400, 6);
}

TEST(Waveform, OscillationAboveTheBandIsNotInIt) {
  Waveform w;
  w.dt_s = 0.001;
  for (int i = 0; i < 20000; ++i) {  // 50 Hz, 300 W amplitude, around 1 kW
    const double t = i * 0.001;
    w.Add(t, 0.001, 0.001 * (1000 + 300 * std::sin(2 * std::numbers::pi * 50 * t)));
  }
  const GridMetrics m = MeasureGrid(w, GridOptions{});
  EXPECT_LT(m.band_rms_w, 3);
  EXPECT_NEAR(m.swing_w, 600, 1);
  GridOptions wide;
  wide.band_hi_hz = 100;
  const GridMetrics all = MeasureGrid(w, wide);
  EXPECT_NEAR(all.band_peak_hz, 50, 0.1);
  EXPECT_NEAR(all.band_rms_w, 300 / std::sqrt(2.0), 3);
}

TEST(Waveform, StartAndStopPaddingAndHostPower) {
  Waveform w;
  w.dt_s = 0.01;
  w.Add(0, 10, 10 * 1000.0);  // a steady 1 kW job
  GridOptions o;
  EXPECT_NEAR(MeasureGrid(w, o).swing_w, 0, 1e-9);
  o.host_w = 300;
  o.pad_s = 2;
  o.idle_w = 100;
  const GridMetrics m = MeasureGrid(w, o);
  EXPECT_NEAR(m.peak_w, 1300, 1e-9);
  EXPECT_NEAR(m.trough_w, 100, 1e-9);
  EXPECT_NEAR(m.swing_w, 1200, 1e-9);  // the job's start
  EXPECT_NEAR(m.energy_j, 10 * 1300 + 4 * 100, 1e-6);
  EXPECT_NEAR(m.duration_s, 14, 1e-9);
}

// The least floor for a limit on the square wave (1000 W / 200 W): a swing
// of at most 400 W needs the trough at 600 W; half the peak needs 500 W.
TEST(Waveform, LeastFloorMeetsTheLimitAndNoLess) {
  const Waveform w = SquareWave();
  GridLimits swing;
  swing.max_swing_w = 400;
  EXPECT_NEAR(LeastFloorW(w, swing, GridOptions{}), 600, 1.0);
  GridLimits half;
  half.min_power_fraction = 0.5;
  EXPECT_NEAR(LeastFloorW(w, half, GridOptions{}), 500, 1.0);
  GridLimits none;
  EXPECT_EQ(LeastFloorW(w, none, GridOptions{}), 0);
  // The floor burns the difference: 0.4 kW for half the time.
  const Waveform floored = WithFloor(w, 600, 0);
  EXPECT_NEAR(floored.EnergyJ() - w.EnergyJ(), 400 * 32, 1e-6);
  EXPECT_NEAR(MeasureGrid(floored, GridOptions{}).swing_w, 400, 1e-9);
}

TEST(Waveform, BadOptionsNameTheirField) {
  const Waveform w = SquareWave();
  auto field = [&](GridOptions o) {
    try {
      MeasureGrid(w, o);
    } catch (const model::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  GridOptions o;
  o.ramp_window_s = 0.001;
  EXPECT_NE(field(o).find("GridOptions::ramp_window_s"), std::string::npos);
  o = {};
  o.band_lo_hz = 30;
  EXPECT_NE(field(o).find("band_lo_hz"), std::string::npos);
  o = {};
  o.host_w = -1;
  EXPECT_NE(field(o).find("GridOptions::host_w"), std::string::npos);
  EXPECT_EQ(MeasureGrid(Waveform{0.01, {}, 0}, GridOptions{}).peak_w, 0);
}

}  // namespace
}  // namespace joulepipe::sim

// The power a whole simulated job draws over time, and what the grid sees
// of it.
//
// In synchronous training every GPU computes, then waits at the gradient
// all-reduce, at once: the job's power swings at every iteration boundary.
// Utilities state what they accept as a ramp-rate limit, a dynamic range
// and limits on oscillation in a frequency band (0.1-20 Hz); a site
// planner needs those figures next to the energy.
//
// Waveform: the whole job's GPU power, the mean over each bin of `dt_s`
// from the job's start, built from the simulator's events (every GPU's
// instructions, waits, stalls and all-reduce, x its tensor-parallel group),
// so its integral is exactly the job's simulated GPU energy.
//
// GridMetrics of a waveform, on the power the grid sees (GPU power, plus
// host power for the node's figures, plus idle padding for the job's start
// and stop):
//   peak, trough, mean   of the bins;
//   swing                the largest max - min within any window of
//                        swing_window_s (1 s): the step a utility sees;
//   ramp                 the largest |change| between the mean powers of two
//                        consecutive windows of ramp_window_s (0.1 s),
//                        divided by that window: W/s;
//   band                 the oscillation between band_lo_hz and band_hi_hz
//                        (0.1-20 Hz): its RMS (W) and its largest component
//                        (amplitude in W, at its frequency), from the
//                        spectrum of the mean-removed waveform;
//   energy               the integral.
#pragma once

#include <vector>

namespace joulepipe::sim {

struct Waveform {
  double dt_s = 0;            // bin width, > 0
  std::vector<double> gpu_w;  // the job's GPU power, mean over each bin
  double end_s = 0;           // where the last event ends (inside the last bin)

  // Adds `energy_j` spread evenly over [start_s, start_s + duration_s)
  // (bins grow as needed). A zero duration adds nothing.
  void Add(double start_s, double duration_s, double energy_j);
  double EnergyJ() const;
  // How much of the last bin the run covers (up to end_s; the whole bin
  // when end_s does not say): its power is the mean over that part.
  double LastBinS() const;
};

struct GridOptions {
  double swing_window_s = 1;
  double ramp_window_s = 0.1;
  double band_lo_hz = 0.1;
  double band_hi_hz = 20;
  // Host power of the whole job (CPU, DRAM, NIC of its nodes), W, drawn
  // while the job runs: 0 for GPU-only figures.
  double host_w = 0;
  // The job's start and stop: `pad_s` of `idle_w` (the whole job's power
  // before it starts and after it ends) on both sides, so the swing and
  // ramp include them. 0: the waveform alone.
  double pad_s = 0;
  double idle_w = 0;
};

struct GridMetrics {
  double duration_s = 0;  // of the waveform (padding included)
  double peak_w = 0, trough_w = 0, mean_w = 0;
  double swing_w = 0;
  double ramp_w_per_s = 0;
  double band_rms_w = 0;
  double band_peak_w = 0, band_peak_hz = 0;
  double energy_j = 0;
};

// The one-sided amplitude spectrum of the waveform's power as MeasureGrid
// sees it (host_w added; no padding), mean removed: the amplitude (W) of
// each frequency from lo_hz to hi_hz, on the FFT's grid.
struct Spectrum {
  std::vector<double> hz, amplitude_w;
};
Spectrum AmplitudeSpectrum(const Waveform& waveform, double lo_hz, double hi_hz, double host_w = 0);

// GridOptions for a measured waveform of `dt_s` bins (power read every
// dt_s): the windows at least one bin long, the band at most half the bin
// rate (its low end at most half its high end).
GridOptions MeasuredGridOptions(double dt_s);

// The last bin counts for the part of it before Waveform::end_s (its power
// is the mean over that part). Throws model::InputError naming GridOptions::<field> for a window
// shorter than a bin, an empty or inverted band, or negative power; an empty waveform gives zeros.
GridMetrics MeasureGrid(const Waveform& waveform, const GridOptions& options);

}  // namespace joulepipe::sim

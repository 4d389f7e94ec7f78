#include "simulate_grid.hpp"

#include <algorithm>
#include <cmath>

#include "format.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::cli {

namespace {

double Mw(double w) {
  return w / 1e6;
}

nlohmann::ordered_json MetricsJson(const sim::GridMetrics& m) {
  return {{"peak_w", m.peak_w},
          {"trough_w", m.trough_w},
          {"mean_w", m.mean_w},
          {"swing_w", m.swing_w},
          {"ramp_w_per_s", m.ramp_w_per_s},
          {"band_rms_w", m.band_rms_w},
          {"band_peak_w", m.band_peak_w},
          {"band_peak_hz", m.band_peak_hz},
          {"energy_j", m.energy_j},
          {"duration_s", m.duration_s}};
}

}  // namespace

double GridWaveformDtS(const GridFlags& f) {
  if (!f.grid && f.waveform_csv.empty()) return 0;
  if (!(std::isfinite(f.waveform_ms) && f.waveform_ms >= 0.1 && f.waveform_ms <= 10000)) {
    throw model::InputError("--waveform-ms",
                            Printf("--waveform-ms must be 0.1..10000 ms (got %g): the width of "
                                   "the waveform's bins; 10 gives the 10 ms the grid figures "
                                   "assume",
                                   f.waveform_ms));
  }
  const double nyquist = 0.5 / (f.waveform_ms * 1e-3);
  if (!(std::isfinite(f.band_lo_hz) && std::isfinite(f.band_hi_hz) && f.band_lo_hz >= 0 &&
        f.band_hi_hz > f.band_lo_hz && f.band_hi_hz <= nyquist)) {
    throw model::InputError("--band-hi-hz",
                            Printf("the band must be 0 <= --band-lo-hz < --band-hi-hz <= %g Hz "
                                   "(half the bin rate of --waveform-ms %g; got %g..%g Hz)",
                                   nyquist, f.waveform_ms, f.band_lo_hz, f.band_hi_hz));
  }
  return f.waveform_ms * 1e-3;
}

sim::GridOptions GridOptionsOf(const GridFlags& f, const sim::SimulateOutcome& outcome,
                               double host_power_w) {
  sim::GridOptions o;
  o.band_lo_hz = f.band_lo_hz;
  o.band_hi_hz = f.band_hi_hz;
  const sim::JobSpec& job = outcome.request.job;
  o.host_w = host_power_w * static_cast<double>(job.pipelines) * job.gpus_per_stage *
             outcome.request.spec.stages;
  return o;
}

std::string GridText(const sim::SimulateOutcome& outcome, const sim::GridOptions& o, double dt_s) {
  std::string s = Printf(
      "grid          the job's %s power in %g ms bins; swing within 1 s, ramp between "
      "0.1 s means, band %g-%g Hz\n",
      o.host_w > 0 ? "GPU + host" : "GPU", dt_s * 1e3, o.band_lo_hz, o.band_hi_hz);
  s += Printf("  %-10s %9s %9s %9s %11s %10s   %s\n", "policy", "peak", "trough", "swing", "ramp",
              "band RMS", "largest in band");
  for (const sim::SimulationResult* run : {&outcome.baseline, &outcome.joulepipe}) {
    const sim::GridMetrics m = sim::MeasureGrid(run->waveform, o);
    s += Printf("  %-10s %6.3f MW %6.3f MW %6.3f MW %6.2f MW/s %7.3f MW   %.3f MW at %.3g Hz\n",
                sim::PolicyName(run->policy), Mw(m.peak_w), Mw(m.trough_w), Mw(m.swing_w),
                Mw(m.ramp_w_per_s), Mw(m.band_rms_w), Mw(m.band_peak_w), m.band_peak_hz);
  }
  return s;
}

nlohmann::ordered_json GridJson(const sim::SimulateOutcome& outcome, const sim::GridOptions& o,
                        double dt_s) {
  return {{"bin_s", dt_s},
          {"band_hz", {o.band_lo_hz, o.band_hi_hz}},
          {"host_w", o.host_w},
          {"swing_window_s", o.swing_window_s},
          {"ramp_window_s", o.ramp_window_s},
          {"baseline", MetricsJson(sim::MeasureGrid(outcome.baseline.waveform, o))},
          {"joulepipe", MetricsJson(sim::MeasureGrid(outcome.joulepipe.waveform, o))}};
}

std::string WaveformCsv(const sim::SimulateOutcome& outcome, const sim::GridOptions& o) {
  const sim::Waveform& a = outcome.baseline.waveform;
  const sim::Waveform& b = outcome.joulepipe.waveform;
  std::string s = o.host_w > 0 ? "time_s,baseline_node_w,joulepipe_node_w\n"
                               : "time_s,baseline_gpu_w,joulepipe_gpu_w\n";
  const std::size_t n = std::max(a.gpu_w.size(), b.gpu_w.size());
  // A run that ended earlier is over: its job draws nothing more.
  auto at = [&](const sim::Waveform& w, std::size_t i) {
    return i < w.gpu_w.size() ? w.gpu_w[i] + o.host_w : 0.0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    s += Printf("%.6f,%.3f,%.3f\n", static_cast<double>(i) * a.dt_s, at(a, i), at(b, i));
  }
  return s;
}

}  // namespace joulepipe::cli

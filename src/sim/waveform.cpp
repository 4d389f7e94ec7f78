#include "joulepipe/sim/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <deque>
#include <numbers>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::sim {

namespace {

using model::Format;

void Check(bool ok, const char* field, const std::string& message) {
  if (!ok) throw model::InputError(field, message);
}

// In-place radix-2 FFT; x.size() is a power of two.
void Fft(std::vector<std::complex<double>>& x) {
  const std::size_t n = x.size();
  for (std::size_t i = 1, j = 0; i < n; ++i) {
    std::size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(x[i], x[j]);
  }
  for (std::size_t len = 2; len <= n; len <<= 1) {
    const double angle = -2 * std::numbers::pi / static_cast<double>(len);
    const std::complex<double> step(std::cos(angle), std::sin(angle));
    for (std::size_t i = 0; i < n; i += len) {
      std::complex<double> w(1, 0);
      for (std::size_t k = 0; k < len / 2; ++k) {
        const std::complex<double> u = x[i + k], v = x[i + k + len / 2] * w;
        x[i + k] = u + v;
        x[i + k + len / 2] = u - v;
        w *= step;
      }
    }
  }
}

// The largest max - min over any `window` consecutive values (monotone
// deques: O(n)).
double LargestSwing(const std::vector<double>& p, std::size_t window) {
  std::deque<std::size_t> hi, lo;
  double swing = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    while (!hi.empty() && p[hi.back()] <= p[i]) hi.pop_back();
    while (!lo.empty() && p[lo.back()] >= p[i]) lo.pop_back();
    hi.push_back(i);
    lo.push_back(i);
    while (hi.front() + window <= i) hi.pop_front();
    while (lo.front() + window <= i) lo.pop_front();
    swing = std::max(swing, p[hi.front()] - p[lo.front()]);
  }
  return swing;
}

// The zero-padded FFT of `p` less `mean`: (bins, its length M).
std::vector<std::complex<double>> MeanRemovedFft(const std::vector<double>& p, double mean) {
  std::size_t size = 1;
  while (size < p.size()) size <<= 1;
  std::vector<std::complex<double>> x(size, 0.0);
  for (std::size_t i = 0; i < p.size(); ++i) x[i] = p[i] - mean;
  Fft(x);
  return x;
}

// The power series MeasureGrid measures: host added, padding, the last
// (partial) bin as the mean over its covered part.
std::vector<double> Series(const Waveform& waveform, double host_w, std::size_t pad,
                           double idle_w) {
  std::vector<double> p(pad, idle_w);
  p.reserve(waveform.gpu_w.size() + 2 * pad);
  for (double w : waveform.gpu_w) p.push_back(w + host_w);
  p.back() = waveform.gpu_w.back() * waveform.dt_s / waveform.LastBinS() + host_w;
  p.insert(p.end(), pad, idle_w);
  return p;
}

}  // namespace

Spectrum AmplitudeSpectrum(const Waveform& waveform, double lo_hz, double hi_hz, double host_w) {
  Spectrum out;
  if (waveform.gpu_w.empty() || !(waveform.dt_s > 0)) return out;
  const std::vector<double> p = Series(waveform, host_w, 0, 0);
  double mean = 0;
  for (double w : p) mean += w;
  mean /= static_cast<double>(p.size());
  const std::vector<std::complex<double>> x = MeanRemovedFft(p, mean);
  const double df = 1 / (static_cast<double>(x.size()) * waveform.dt_s);
  for (std::size_t k = 1; k <= x.size() / 2; ++k) {
    const double f = static_cast<double>(k) * df;
    if (f < lo_hz || f > hi_hz) continue;
    out.hz.push_back(f);
    out.amplitude_w.push_back(2 * std::abs(x[k]) / static_cast<double>(p.size()));
  }
  return out;
}

void Waveform::Add(double start_s, double duration_s, double energy_j) {
  if (!(duration_s > 0)) return;
  const double power = energy_j / duration_s;
  const double end_s = start_s + duration_s;
  this->end_s = std::max(this->end_s, end_s);
  const auto first = static_cast<std::size_t>(std::max(0.0, std::floor(start_s / dt_s)));
  const auto last = static_cast<std::size_t>(std::max(0.0, std::ceil(end_s / dt_s)));
  if (gpu_w.size() < last) gpu_w.resize(last, 0.0);
  for (std::size_t b = first; b < last; ++b) {
    const double lo = std::max(start_s, static_cast<double>(b) * dt_s);
    const double hi = std::min(end_s, static_cast<double>(b + 1) * dt_s);
    if (hi > lo) gpu_w[b] += power * (hi - lo) / dt_s;
  }
}

double Waveform::LastBinS() const {
  const double last_s = std::clamp(end_s - static_cast<double>(gpu_w.size() - 1) * dt_s, 0.0, dt_s);
  return last_s > 0 ? last_s : dt_s;
}

double Waveform::EnergyJ() const {
  double sum = 0;
  for (double w : gpu_w) sum += w;
  return sum * dt_s;
}

GridMetrics MeasureGrid(const Waveform& waveform, const GridOptions& o) {
  const double dt = waveform.dt_s;
  Check(std::isfinite(dt) && dt > 0, "Waveform::dt_s",
        Format("Waveform::dt_s must be > 0 s (got %g): the bin width", dt));
  Check(std::isfinite(o.swing_window_s) && o.swing_window_s >= dt, "GridOptions::swing_window_s",
        Format("GridOptions::swing_window_s must be at least one bin (%g s; got %g s)", dt,
               o.swing_window_s));
  Check(std::isfinite(o.ramp_window_s) && o.ramp_window_s >= dt, "GridOptions::ramp_window_s",
        Format("GridOptions::ramp_window_s must be at least one bin (%g s; got %g s)", dt,
               o.ramp_window_s));
  Check(std::isfinite(o.band_lo_hz) && std::isfinite(o.band_hi_hz) && o.band_lo_hz >= 0 &&
            o.band_hi_hz > o.band_lo_hz,
        "GridOptions::band_lo_hz",
        Format("the band must be 0 <= GridOptions::band_lo_hz < band_hi_hz (got %g..%g Hz)",
               o.band_lo_hz, o.band_hi_hz));
  Check(std::isfinite(o.host_w) && o.host_w >= 0 && std::isfinite(o.idle_w) && o.idle_w >= 0 &&
            std::isfinite(o.pad_s) && o.pad_s >= 0,
        "GridOptions::host_w",
        Format("GridOptions::host_w, idle_w and pad_s must be >= 0 (got %g W, %g W, %g s)",
               o.host_w, o.idle_w, o.pad_s));
  GridMetrics m;
  if (waveform.gpu_w.empty()) return m;

  const auto pad = static_cast<std::size_t>(std::llround(o.pad_s / dt));
  // The last bin is covered up to end_s only: its power is the mean there.
  const std::vector<double> p = Series(waveform, o.host_w, pad, o.idle_w);
  const std::size_t bins = waveform.gpu_w.size();
  const std::size_t n = p.size();

  m.peak_w = p[0];
  m.trough_w = p[0];
  for (double w : p) {
    m.peak_w = std::max(m.peak_w, w);
    m.trough_w = std::min(m.trough_w, w);
  }
  const double run_s = static_cast<double>(bins - 1) * dt + waveform.LastBinS();
  m.duration_s = run_s + 2 * static_cast<double>(pad) * dt;
  m.energy_j = waveform.EnergyJ() + o.host_w * run_s + o.idle_w * 2 * static_cast<double>(pad) * dt;
  m.mean_w = m.energy_j / m.duration_s;

  const auto swing_bins =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(o.swing_window_s / dt)));
  m.swing_w = LargestSwing(p, std::min(swing_bins, n));

  // Ramp: the means of consecutive windows of r bins, as prefix sums.
  const auto r =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(o.ramp_window_s / dt)));
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + p[i];
  for (std::size_t i = 0; i + 2 * r <= n; ++i) {
    const double a = (prefix[i + r] - prefix[i]) / static_cast<double>(r);
    const double b = (prefix[i + 2 * r] - prefix[i + r]) / static_cast<double>(r);
    m.ramp_w_per_s = std::max(m.ramp_w_per_s, std::abs(b - a) / (static_cast<double>(r) * dt));
  }

  // The band: zero-padded FFT of the mean-removed waveform. Parseval with
  // padding to M: sum x^2 = (1/M) sum |X|^2, so the band's mean square over
  // the n real samples is (2 / (n M)) sum over its one-sided bins.
  const std::vector<std::complex<double>> x = MeanRemovedFft(p, m.mean_w);
  const std::size_t size = x.size();
  const double df = 1 / (static_cast<double>(size) * dt);
  double band_power = 0;
  for (std::size_t k = 1; k <= size / 2; ++k) {
    const double f = static_cast<double>(k) * df;
    if (f < o.band_lo_hz || f > o.band_hi_hz) continue;
    const double magnitude = std::abs(x[k]);
    band_power += 2 * magnitude * magnitude;
    const double amplitude = 2 * magnitude / static_cast<double>(n);
    if (amplitude > m.band_peak_w) {
      m.band_peak_w = amplitude;
      m.band_peak_hz = f;
    }
  }
  m.band_rms_w = std::sqrt(band_power / (static_cast<double>(n) * static_cast<double>(size)));
  return m;
}

GridOptions MeasuredGridOptions(double dt_s) {
  GridOptions o;
  o.swing_window_s = std::max(o.swing_window_s, dt_s);
  o.ramp_window_s = std::max(o.ramp_window_s, dt_s);
  o.band_hi_hz = std::min(o.band_hi_hz, 0.5 / dt_s);
  o.band_lo_hz = std::min(o.band_lo_hz, 0.5 * o.band_hi_hz);
  return o;
}

}  // namespace joulepipe::sim

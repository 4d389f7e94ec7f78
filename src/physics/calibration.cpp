// Fitting the DVFS model to measured profiles (calibration.hpp).
#include "joulepipe/physics/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "joulepipe/model/error.hpp"

namespace joulepipe::physics {
namespace {

using model::ClockPoint;
using model::Kind;
using Vec = std::vector<double>;
using Objective = std::function<double(const Vec&)>;

// ---- Nelder–Mead (standard coefficients), minimising f from x0 with the
// initial simplex x0 + step_i * e_i. Stops after max_evals or when the
// simplex's values agree to `tol` (absolute). Returns the best point.
Vec NelderMead(const Objective& f, Vec x0, const Vec& step, int max_evals, double tol,
               double* best_value) {
  const std::size_t n = x0.size();
  std::vector<Vec> x(n + 1, x0);
  Vec fx(n + 1);
  for (std::size_t i = 0; i < n; ++i) x[i + 1][i] += step[i];
  int evals = 0;
  for (std::size_t i = 0; i <= n; ++i) fx[i] = f(x[i]), ++evals;
  std::vector<std::size_t> order(n + 1);
  auto along = [&](const Vec& c, const Vec& p, double t) {
    Vec out(n);
    for (std::size_t k = 0; k < n; ++k) out[k] = c[k] + t * (p[k] - c[k]);
    return out;
  };
  while (evals < max_evals) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return fx[a] < fx[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (fx[worst] - fx[best] <= tol) break;
    Vec centroid(n, 0.0);
    for (std::size_t i : order) {
      if (i == worst) continue;
      for (std::size_t k = 0; k < n; ++k) centroid[k] += x[i][k] / n;
    }
    const Vec reflected = along(centroid, x[worst], -1.0);
    const double fr = f(reflected);
    ++evals;
    if (fr < fx[best]) {
      const Vec expanded = along(centroid, x[worst], -2.0);
      const double fe = f(expanded);
      ++evals;
      if (fe < fr) {
        x[worst] = expanded, fx[worst] = fe;
      } else {
        x[worst] = reflected, fx[worst] = fr;
      }
    } else if (fr < fx[second]) {
      x[worst] = reflected, fx[worst] = fr;
    } else {
      const bool outside = fr < fx[worst];
      const Vec contracted = along(centroid, outside ? reflected : x[worst], 0.5);
      const double fc = f(contracted);
      ++evals;
      if (fc < std::min(fr, fx[worst])) {
        x[worst] = contracted, fx[worst] = fc;
      } else {  // shrink towards the best point
        for (std::size_t i = 0; i <= n; ++i) {
          if (i == best) continue;
          x[i] = along(x[best], x[i], 0.5);
          fx[i] = f(x[i]);
          ++evals;
        }
      }
    }
  }
  const std::size_t best = std::min_element(fx.begin(), fx.end()) - fx.begin();
  *best_value = fx[best];
  return x[best];
}

// Nelder–Mead restarted from its own result with a fresh simplex until a
// restart no longer improves (guards against a collapsed simplex).
Vec Minimise(const Objective& f, Vec x, const Vec& step, int evals_per_run, double tol,
             double* best_value) {
  double value = f(x);
  for (int restart = 0; restart < 4; ++restart) {
    double next_value = 0;
    Vec next = NelderMead(f, x, step, evals_per_run, tol, &next_value);
    const bool improved = next_value < value - tol;
    if (next_value < value) x = std::move(next), value = next_value;
    if (!improved) break;
  }
  *best_value = value;
  return x;
}

// Quadratic penalty outside [lo, hi], scaled by `scale`; `x` is clamped.
double Bound(double* x, double lo, double hi, double scale) {
  const double clamped = std::clamp(*x, lo, hi);
  const double d = (*x - clamped) / scale;
  *x = clamped;
  return 1e3 * d * d;
}

struct Measured {
  int stage;
  Kind kind;
  std::vector<ClockPoint> all;  // highest clock first
  std::vector<ClockPoint> fit;  // those >= min_fit_mhz
};

// Model time and energy for time_at_max_s = 1 at each fitted clock,
// relative to the measurement: a_i = t_i / t_meas, b_i = e_i / e_meas.
// Then with time_at_max_s = s the relative errors are s*a_i - 1 and s*b_i - 1,
// and the least-squares s is sum(a + b) / sum(a^2 + b^2).
double CostAndScale(const GpuSpec& gpu, const Measured& m, double beta, double activity,
                    double limit, double* scale) {
  const Work unit{1.0, beta, activity};
  double sum = 0, sum_sq = 0;
  for (const ClockPoint& p : m.fit) {
    const OperatingPoint op = Run(gpu, unit, p.mhz, limit);
    const double a = op.time_s / p.time_s, b = op.energy_j / p.energy_j;
    sum += a + b;
    sum_sq += a * a + b * b;
  }
  const double s = sum / sum_sq;
  // sum (s a - 1)^2 + (s b - 1)^2 = s^2 sum_sq - 2 s sum + 2 n
  *scale = s;
  return std::max(0.0, s * s * sum_sq - 2 * s * sum + 2.0 * m.fit.size());
}

// Initial activity: from the measured power at the lowest fitted clock,
// assuming it is not power-capped.
double GuessActivity(const GpuSpec& gpu, const Measured& m) {
  const ClockPoint& low = m.fit.back();
  const double power = low.energy_j / low.time_s;
  const double v = Voltage(gpu, low.mhz) / gpu.dvfs.v_max_v;
  const double per_activity = gpu.dvfs.dynamic_w * (low.mhz / double(gpu.max_sm_mhz)) * v * v;
  return std::clamp((power - gpu.dvfs.static_w) / per_activity, 0.05, 5.0);
}

// Fits one (stage, kind); returns its cost (sum of squared relative errors).
double FitOne(const GpuSpec& gpu, const Measured& m, double limit, Work* work) {
  auto cost = [&](const Vec& x) {
    double beta = x[0], activity = x[1], scale = 0;
    double penalty = Bound(&beta, 0.0, 1.0, 0.01) + Bound(&activity, 1e-3, 10.0, 0.01);
    return CostAndScale(gpu, m, beta, activity, limit, &scale) + penalty;
  };
  // Coarse scan over beta at the guessed activity, then Nelder–Mead.
  const double activity0 = GuessActivity(gpu, m);
  Vec best{0.5, activity0};
  double best_cost = cost(best);
  for (int i = 0; i <= 10; ++i) {
    const Vec x{i / 10.0, activity0};
    const double c = cost(x);
    if (c < best_cost) best = x, best_cost = c;
  }
  double value = 0;
  Vec x = Minimise(cost, best, {0.05, 0.05 * activity0 + 0.01}, 400, 1e-12, &value);
  x[0] = std::clamp(x[0], 0.0, 1.0);
  x[1] = std::clamp(x[1], 1e-3, 10.0);
  double scale = 0;
  const double c = CostAndScale(gpu, m, x[0], x[1], limit, &scale);
  *work = Work{scale, x[0], x[1]};
  return c;
}

std::vector<Measured> Collect(const model::Profile& profile, int min_fit_mhz,
                              const std::string& what) {
  std::vector<Measured> out;
  for (int stage = 0; stage < profile.num_stages(); ++stage) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const auto& points = profile.Points(stage, kind);
      if (points.empty()) continue;
      Measured m{stage, kind, points, {}};
      for (const ClockPoint& p : points) {
        if (p.mhz >= min_fit_mhz) m.fit.push_back(p);
      }
      if (m.fit.size() < 3) {
        throw model::InputError(
            what + ": stage " + std::to_string(stage) + " " + std::string(model::KindName(kind)) +
            " has " + std::to_string(m.fit.size()) + " clocks >= " + std::to_string(min_fit_mhz) +
            " MHz; calibration needs at least 3");
      }
      out.push_back(std::move(m));
    }
  }
  if (out.empty()) throw model::InputError(what + ": the profile is empty");
  return out;
}

double LimitFor(const GpuSpec& gpu, const CalibrationOptions& options) {
  if (options.power_limit_w < 0) {
    throw model::InputError("calibration: power_limit_w must be >= 0 (got " +
                            std::to_string(options.power_limit_w) + ")");
  }
  return options.power_limit_w > 0 ? options.power_limit_w : gpu.power_limit_max_w;
}

Calibration FitMeasured(const GpuSpec& gpu, const std::vector<Measured>& measured, double limit) {
  Calibration cal;
  cal.gpu = gpu;
  cal.power_limit_w = limit;
  for (const Measured& m : measured) {
    Work work;
    cal.objective += FitOne(gpu, m, limit, &work);
    cal.works.push_back({m.stage, m.kind, work});
    for (const ClockPoint& p : m.all) {
      const OperatingPoint op = Run(gpu, work, p.mhz, limit);
      CalibrationRow row;
      row.stage = m.stage;
      row.kind = m.kind;
      row.mhz = p.mhz;
      row.measured_time_s = p.time_s;
      row.measured_energy_j = p.energy_j;
      row.model_time_s = op.time_s;
      row.model_energy_j = op.energy_j;
      row.effective_mhz = op.effective_mhz;
      row.time_error = op.time_s / p.time_s - 1.0;
      row.energy_error = op.energy_j / p.energy_j - 1.0;
      cal.rows.push_back(row);
    }
  }
  return cal;
}

// Median (mean of the middle two for even counts) and p90 (nearest rank) of
// the absolute values.
void Stats(std::vector<double> v, double* median, double* p90, double* max) {
  for (double& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  *p90 = v[static_cast<std::size_t>(std::ceil(0.9 * n)) - 1];
  *max = v.back();
}

}  // namespace

ErrorStats Calibration::Summary(int min_mhz, std::optional<Kind> kind) const {
  std::vector<double> t, e;
  for (const CalibrationRow& row : rows) {
    if (row.mhz < min_mhz || (kind && row.kind != *kind)) continue;
    t.push_back(row.time_error);
    e.push_back(row.energy_error);
  }
  ErrorStats s;
  s.points = static_cast<int>(t.size());
  if (t.empty()) return s;
  Stats(t, &s.median_time, &s.p90_time, &s.max_time);
  Stats(e, &s.median_energy, &s.p90_energy, &s.max_energy);
  return s;
}

Calibration FitWorks(const GpuSpec& gpu, const model::Profile& profile,
                     const CalibrationOptions& options) {
  const double limit = LimitFor(gpu, options);
  return FitMeasured(gpu, Collect(profile, options.min_fit_mhz, gpu.id + " calibration"), limit);
}

DvfsFit FitDvfs(const GpuSpec& gpu, const std::vector<model::Profile>& profiles,
                const CalibrationOptions& options) {
  const double limit = LimitFor(gpu, options);
  std::vector<std::vector<Measured>> measured;
  double lowest_power = limit;  // static_w cannot exceed any measured power
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    measured.push_back(Collect(profiles[i], options.min_fit_mhz,
                               gpu.id + " calibration, profile " + std::to_string(i)));
    for (const Measured& m : measured.back()) {
      for (const ClockPoint& p : m.fit)
        lowest_power = std::min(lowest_power, p.energy_j / p.time_s);
    }
  }
  if (measured.empty()) throw model::InputError(gpu.id + " calibration: no profiles given");

  const double min_ridge =
      std::clamp(options.min_ridge_mhz, double(gpu.min_sm_mhz), double(gpu.max_sm_mhz));
  // x = (v_max_v, ridge_mhz, static_w); dynamic_w stays at gpu's during the
  // search (it is degenerate with the activities) and is normalised after.
  auto with = [&](Vec x, double* penalty) {
    GpuSpec g = gpu;
    *penalty = Bound(&x[0], gpu.dvfs.v_min_v, 2.0 * gpu.dvfs.v_min_v, 0.01) +
               Bound(&x[1], min_ridge, gpu.max_sm_mhz, 10.0) +
               Bound(&x[2], 0.0, 0.95 * lowest_power, 1.0);
    g.dvfs.v_max_v = x[0];
    g.dvfs.ridge_mhz = x[1];
    g.dvfs.static_w = x[2];
    return g;
  };
  auto cost = [&](const Vec& x) {
    double penalty = 0;
    const GpuSpec g = with(x, &penalty);
    double total = penalty;
    for (const auto& m : measured) {
      for (const Measured& one : m) {
        Work work;
        total += FitOne(g, one, limit, &work);
      }
    }
    return total;
  };
  // Starts: the given parameters and ridges across the upper clock range
  // (the objective has local minima in the ridge).
  Vec best{gpu.dvfs.v_max_v, std::max(gpu.dvfs.ridge_mhz, min_ridge), gpu.dvfs.static_w};
  double best_cost = cost(best);
  for (double share : {0.55, 0.65, 0.75, 0.85}) {
    const Vec x{gpu.dvfs.v_max_v, min_ridge + share * (gpu.max_sm_mhz - min_ridge),
                gpu.dvfs.static_w};
    const double c = cost(x);
    if (c < best_cost) best = x, best_cost = c;
  }
  double value = 0;
  best = Minimise(cost, best, {0.03, 60.0, 15.0}, 300, 1e-9, &value);

  double penalty = 0;
  GpuSpec fitted = with(best, &penalty);
  // Normalise: mean activity over all works = 1 (scale dynamic_w by it).
  double activity_sum = 0;
  int works = 0;
  for (const auto& m : measured) {
    const Calibration c = FitMeasured(fitted, m, limit);
    for (const FittedWork& w : c.works) activity_sum += w.work.activity, ++works;
  }
  fitted.dvfs.dynamic_w *= activity_sum / works;

  DvfsFit fit;
  fit.dvfs = fitted.dvfs;
  for (const auto& m : measured) {
    fit.calibrations.push_back(FitMeasured(fitted, m, limit));
    fit.objective += fit.calibrations.back().objective;
  }
  return fit;
}

ErrorStats CompareClockResponse(const model::Profile& measured, const model::Profile& simulated,
                                int min_mhz) {
  std::vector<double> t, e;
  for (int stage = 0; stage < measured.num_stages(); ++stage) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const std::vector<ClockPoint>& points = measured.Points(stage, kind);
      if (points.empty()) continue;
      const ClockPoint& top = points.front();
      const ClockPoint* sim_top = simulated.Find(stage, kind, top.mhz);
      if (sim_top == nullptr) {
        throw model::InputError("the simulated profile has no " +
                                std::string(model::KindName(kind)) + " row for stage " +
                                std::to_string(stage) + " at " + std::to_string(top.mhz) +
                                " MHz, the measured profile's highest clock");
      }
      for (const ClockPoint& m : points) {
        const ClockPoint* s = simulated.Find(stage, kind, m.mhz);
        if (m.mhz < min_mhz || s == nullptr) continue;
        t.push_back((s->time_s / sim_top->time_s) / (m.time_s / top.time_s) - 1);
        e.push_back((s->energy_j / sim_top->energy_j) / (m.energy_j / top.energy_j) - 1);
      }
    }
  }
  if (t.empty()) {
    throw model::InputError(
        "the measured and simulated profiles share no (stage, kind, clock) >= " +
        std::to_string(min_mhz) + " MHz");
  }
  ErrorStats s;
  s.points = static_cast<int>(t.size());
  Stats(t, &s.median_time, &s.p90_time, &s.max_time);
  Stats(e, &s.median_energy, &s.p90_energy, &s.max_energy);
  return s;
}

}  // namespace joulepipe::physics

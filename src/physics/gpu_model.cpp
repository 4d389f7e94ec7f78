// The DVFS formulas of gpu_model.hpp. Parsing and the catalog live in
// gpu_catalog.cpp.
#include "joulepipe/physics/gpu_model.hpp"

#include <algorithm>
#include <cmath>

namespace joulepipe::physics {

std::vector<int> GpuSpec::SupportedSmClocks() const {
  std::vector<int> clocks;
  if (sm_step_mhz <= 0) return {max_sm_mhz};
  for (int mhz = max_sm_mhz; mhz >= min_sm_mhz; mhz -= sm_step_mhz) clocks.push_back(mhz);
  return clocks;
}

double Voltage(const GpuSpec& gpu, double mhz) {
  const DvfsModel& d = gpu.dvfs;
  if (mhz <= d.ridge_mhz || gpu.max_sm_mhz <= d.ridge_mhz) return d.v_min_v;
  const double rise = (mhz - d.ridge_mhz) / (gpu.max_sm_mhz - d.ridge_mhz);
  return d.v_min_v + (d.v_max_v - d.v_min_v) * rise;
}

double Power(const GpuSpec& gpu, double activity, double mhz) {
  const DvfsModel& d = gpu.dvfs;
  const double v = Voltage(gpu, mhz) / d.v_max_v;
  return d.static_w + d.dynamic_w * activity * (mhz / gpu.max_sm_mhz) * v * v;
}

OperatingPoint Run(const GpuSpec& gpu, const Work& work, double requested_mhz,
                   double power_limit_w) {
  const double lo = gpu.min_sm_mhz, hi = gpu.max_sm_mhz;
  const double limit = power_limit_w > 0 ? power_limit_w : gpu.tdp_w;
  OperatingPoint op;
  op.requested_mhz = requested_mhz;
  double f = std::clamp(requested_mhz, lo, hi);
  // P is increasing in f, so the cap is the root of P(f) = limit; bisection
  // to 1e-3 MHz is exact for any practical purpose and runs once per call.
  // It always brackets [min, max] clock, so every requested clock above the
  // cap gets exactly the same effective clock.
  if (Power(gpu, work.activity, f) > limit) {
    op.power_capped = true;
    double a = lo, b = hi;
    if (Power(gpu, work.activity, a) >= limit) {
      f = a;
    } else {
      while (b - a > 1e-3) {
        const double m = 0.5 * (a + b);
        (Power(gpu, work.activity, m) > limit ? b : a) = m;
      }
      f = a;
    }
  }
  op.effective_mhz = f;
  op.voltage_v = Voltage(gpu, f);
  const double beta = work.compute_fraction;
  op.time_s = work.time_at_max_s * (beta * hi / f + 1.0 - beta);
  op.power_w = Power(gpu, work.activity, f);
  op.energy_j = op.power_w * op.time_s;
  return op;
}

}  // namespace joulepipe::physics

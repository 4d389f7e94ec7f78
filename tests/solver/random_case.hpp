// A random pipeline for the solver's property tests: a schedule of any kind,
// a DVFS-shaped profile and a blocking power (energy_rule_test,
// relaxation_test).
#pragma once

#include <cmath>
#include <random>
#include <string>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::solver {

// One random pipeline: its schedule, a DVFS-shaped profile (one row per
// physical stage, or per virtual stage for half the interleaved ones) and a
// blocking power, 0 included.
struct Case {
  schedule::Schedule schedule;
  model::Profile profile;
  double p_block_w = 0;
  std::string name;
};

inline Case RandomCase(std::mt19937& rng, schedule::Kind kind) {
  auto integer = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  schedule::Spec spec;
  spec.kind = kind;
  spec.stages = integer(1, 5);
  if (kind == schedule::Kind::kInterleaved) {
    spec.stages = integer(2, 4);
    spec.chunks = integer(2, 3);
    spec.microbatches = spec.stages * integer(1, 3);
  } else {
    spec.microbatches = integer(1, 8);
  }
  Case c;
  c.schedule = schedule::Build(spec);
  c.name = std::string(schedule::KindName(kind)) + " S=" + std::to_string(spec.stages) +
           " M=" + std::to_string(spec.microbatches) + " V=" + std::to_string(spec.chunks);
  const bool per_virtual_stage = spec.chunks > 1 && integer(0, 1) == 1;
  const int rows = per_virtual_stage ? spec.stages * spec.chunks : spec.stages;
  const int clocks = integer(1, 9);
  for (int s = 0; s < rows; ++s) {
    const double forward = uniform(0.01, 0.1);
    for (model::Kind k : {model::Kind::kForward, model::Kind::kBackward}) {
      const double t0 = k == model::Kind::kForward ? forward : forward * uniform(1.5, 2.5);
      const double a = uniform(0.2, 0.7), p_max = uniform(150, 450);
      const double p_static = p_max * uniform(0.2, 0.5);
      for (int i = 0; i < clocks; ++i) {
        const double f = 1410 - 45 * i;
        const double time = t0 * (a + (1 - a) * 1410 / f);
        model::ClockPoint point;
        point.mhz = static_cast<int>(f);
        point.time_s = time * uniform(0.97, 1.03);
        point.energy_j =
            (p_static + (p_max - p_static) * std::pow(f / 1410, 2.5)) * time * uniform(0.97, 1.03);
        c.profile.Add(s, k, point);
      }
    }
  }
  c.p_block_w = integer(0, 4) == 0 ? 0.0 : uniform(20, 150);
  c.name += " rows=" + std::to_string(rows) + " P_block=" + std::to_string(c.p_block_w);
  return c;
}

}  // namespace joulepipe::solver

// Profile building blocks shared by the tests of several parts.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "joulepipe/model/profile.hpp"

namespace joulepipe::model::testing {

// One measured clock: `time_s` seconds and `energy_j` joules per instruction
// at `mhz`.
inline ClockPoint Point(int mhz, double time_s, double energy_j) {
  ClockPoint point;
  point.mhz = mhz;
  point.time_s = time_s;
  point.energy_j = energy_j;
  return point;
}

// `stages` stages measured at 1410, 1200, 1000 and 800 MHz. Stage s is
// (1 + skew x s) times slower than stage 0 (so the pipeline has slack or
// waits), a forward takes 10 ms at the top clock and a backward twice that;
// lower clocks take longer and, down to 1000 MHz, use less energy
// (`watts` x the top clock's time at the top clock).
inline Profile FourClockProfile(int stages, double skew, double watts) {
  Profile profile;
  const int clocks[] = {1410, 1200, 1000, 800};
  const double slower[] = {1.0, 1.12, 1.3, 1.62};
  const double cheaper[] = {1.0, 0.86, 0.78, 0.80};
  for (int s = 0; s < stages; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const double t = (kind == Kind::kForward ? 0.010 : 0.020) * (1 + skew * s);
      for (int c = 0; c < 4; ++c) {
        profile.Add(s, kind, Point(clocks[c], t * slower[c], watts * t * cheaper[c]));
      }
    }
  }
  return profile;
}

// `stages` stages with clocks 900..1500 MHz (step 150): time falls with the
// clock, energy is U-shaped, and every stage differs (a jitter of 0.8..1.2
// drawn from `seed`).
inline Profile UShapedProfile(int stages, std::uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  Profile profile;
  for (int s = 0; s < stages; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const double base = (kind == Kind::kForward ? 0.05 : 0.1) * jitter(rng);
      for (int mhz = 900; mhz <= 1500; mhz += 150) {
        const double t = base * 1500.0 / mhz;
        const double power = 150 + 300 * std::pow(mhz / 1500.0, 2.5);
        const double e = t * power * (1 + 0.3 * std::pow((mhz - 1100) / 600.0, 2));
        profile.Add(s, kind, Point(mhz, t, e));
      }
    }
  }
  return profile;
}

}  // namespace joulepipe::model::testing

// Profile building blocks shared by the tests of several parts.
#pragma once

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

}  // namespace joulepipe::model::testing

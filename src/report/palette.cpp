#include "joulepipe/report/palette.hpp"

#include <cmath>
#include <cstdio>

namespace joulepipe::report {

std::string Viridis(double fraction) {
  // Nine samples of matplotlib's viridis at 0, 1/8, ..., 1; linear between.
  static constexpr int kStops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                       {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                       {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
  double f = std::isnan(fraction) ? 0 : fraction;
  f = f < 0 ? 0 : (f > 1 ? 1 : f);
  const double x = f * 8;
  const int i = x >= 8 ? 7 : static_cast<int>(x);
  const double t = x - i;
  char out[8];
  std::snprintf(
      out, sizeof out, "#%02x%02x%02x",
      static_cast<int>(std::lround(kStops[i][0] + t * (kStops[i + 1][0] - kStops[i][0]))),
      static_cast<int>(std::lround(kStops[i][1] + t * (kStops[i + 1][1] - kStops[i][1]))),
      static_cast<int>(std::lround(kStops[i][2] + t * (kStops[i + 1][2] - kStops[i][2]))));
  return out;
}

}  // namespace joulepipe::report

// Colours every report uses, chosen to stay distinguishable for colour-blind
// readers: the Okabe–Ito qualitative palette (Okabe & Ito, "Color Universal
// Design", 2008) for categories, and viridis (van der Walt & Smith, 2015),
// perceptually uniform and monotone in lightness, for clocks.
#pragma once

#include <string>

namespace joulepipe::report {

inline constexpr char kBlue[] = "#0072B2";
inline constexpr char kOrange[] = "#E69F00";
inline constexpr char kVermillion[] = "#D55E00";
inline constexpr char kGreen[] = "#009E73";
inline constexpr char kPurple[] = "#CC79A7";
inline constexpr char kSky[] = "#56B4E9";
inline constexpr char kYellow[] = "#F0E442";
inline constexpr char kGrey[] = "#7f7f7f";

// "#rrggbb" on viridis at `fraction` (0 = dark purple, 1 = yellow),
// clamped to [0, 1]; a NaN gives the low end.
std::string Viridis(double fraction);

}  // namespace joulepipe::report

// TimelineChart: a pipeline's iteration as a self-contained SVG, one row per
// stage, time across. Each instruction is a bar coloured by its SM clock on
// viridis (palette.hpp; a legend maps colours to MHz) and labelled F<m> or
// B<m> when it is wide enough; blocked time (where a stage has no
// instruction) is a light hatched band, so waiting is visible.
//
// Contract: RenderTimelineSvg never fails on finite data; non-finite bars
// are skipped; every bar has a hover <title>.
#pragma once

#include <string>
#include <vector>

namespace joulepipe::report {

struct TimelineBar {
  int stage = 0;
  double start_s = 0;
  double duration_s = 0;
  int mhz = 0;
  std::string label;  // e.g. "F3", drawn inside the bar when it fits
  std::string title;  // hover text
};

struct TimelineChart {
  std::string title;
  std::string subtitle;
  int stages = 0;
  double time_s = 0;  // the iteration's length (the x axis' end)
  int min_mhz = 0;    // the colour scale's ends (usually the profile's)
  int max_mhz = 0;
  std::vector<TimelineBar> bars;
  int width = 1000;
  int row_height = 22;
};

std::string RenderTimelineSvg(const TimelineChart& chart);

}  // namespace joulepipe::report

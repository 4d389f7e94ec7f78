// BarChart: grouped, stacked bars as a self-contained SVG, e.g. energy per
// stage (categories) for the baseline and a plan (series), split into busy
// and blocked (segments). Series are told apart by colour (palette.hpp) and
// by their order within a group; the first segment is solid, later ones
// lighter and hatched, so the split reads without colour too.
//
// Contract: RenderBarSvg never fails on finite data; negative and
// non-finite values are drawn as 0; every bar part has a hover <title>.
#pragma once

#include <string>
#include <vector>

namespace joulepipe::report {

struct BarChart {
  std::string title;
  std::string subtitle;
  std::string y_label;
  std::vector<std::string> categories;     // groups along x
  std::vector<std::string> series;         // bars within a group
  std::vector<std::string> series_colors;  // one per series
  std::vector<std::string> segments;       // stacked parts of a bar
  // values[category][series][segment]; missing entries count as 0.
  std::vector<std::vector<std::vector<double>>> values;
  std::string unit;  // appended to values in hover titles, e.g. "kJ"
  int width = 1000;
  int height = 360;
};

std::string RenderBarSvg(const BarChart& chart);

}  // namespace joulepipe::report

// LineChart: a self-contained SVG line chart (no scripts, no external fonts
// or styles), for frontiers and other curves in reports.
//
// Contract: RenderSvg never fails on finite data. Axes cover every series
// point, marker and reference line with "nice" ticks (1, 2, 2.5, 5 x 10^k);
// all text is XML-escaped; non-finite points are skipped. An empty chart
// renders its title and a "no data" note.
#pragma once

#include <string>
#include <vector>

namespace joulepipe::report {

struct XY {
  double x = 0;
  double y = 0;
};

struct Series {
  std::string label;       // legend text
  std::vector<XY> points;  // drawn in the given order
  std::string color = "#1f77b4";
  bool dashed = false;
  bool dots = false;  // also draw a dot at every point
  // Hover text per point (SVG <title>), drawn on a small dot; empty: none.
  // Used only when it has one entry per point.
  std::vector<std::string> titles;
};

// A labelled point, drawn as a ring with its label beside it.
struct Marker {
  std::string label;
  XY at;
  std::string color = "#d62728";
  std::string title;  // hover text (SVG <title>); empty: the label
};

// A vertical reference line at x (e.g. the baseline iteration time).
struct VerticalLine {
  std::string label;
  double x = 0;
  std::string color = "#7f7f7f";
};

struct LineChart {
  std::string title;
  std::string subtitle;  // one line under the title (e.g. the source of the data)
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  std::vector<Marker> markers;
  std::vector<VerticalLine> vertical_lines;
  int width = 800;
  int height = 500;
};

std::string RenderSvg(const LineChart& chart);

// Text made safe for XML/HTML text and attribute values (&, <, >, quotes;
// control characters other than tab and newline dropped).
std::string EscapeXml(const std::string& text);

// Tick positions covering [lo, hi] with about `target` intervals of a nice
// step; the first tick is <= lo and the last >= hi. Exposed for tests.
std::vector<double> NiceTicks(double lo, double hi, int target);

}  // namespace joulepipe::report

#include "joulepipe/report/timeline_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "joulepipe/report/line_chart.hpp"
#include "joulepipe/report/palette.hpp"
#include "svg_text.hpp"

namespace joulepipe::report {

namespace {

// An upper bound on a bar label's drawn width at font-size 10 sans-serif:
// 7 px a character ("F12.3" is about 29 px drawn, 35 here);
// tests/report/browser_check.py checks that every drawn label fits its bar.
double LabelWidth(const std::string& label) {
  return 7.0 * static_cast<double>(label.size());
}

std::string Num(double v) {
  return SvgNum(v);
}

}  // namespace

std::string RenderTimelineSvg(const TimelineChart& c) {
  const double left = 70, right = 20, top = c.subtitle.empty() ? 40 : 58, legend = 56;
  const int stages = std::max(c.stages, 1);
  const double pw = c.width - left - right, ph = stages * static_cast<double>(c.row_height);
  const double h = top + ph + 30 + legend;
  const double span = c.time_s > 0 && std::isfinite(c.time_s) ? c.time_s : 1;
  auto sx = [&](double t) { return left + t / span * pw; };
  const double lo = c.min_mhz, hi = std::max(c.max_mhz, c.min_mhz + 1);
  auto colour = [&](int mhz) { return Viridis((mhz - lo) / (hi - lo)); };

  std::string svg =
      SvgOpen(c.width, h, c.title, c.subtitle,
              "<pattern id=\"blocked\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
              "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
              "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/>"
              "</pattern>");
  // Rows: the hatched background is blocked time wherever no bar covers it.
  for (int s = 0; s < stages; ++s) {
    const double y = top + s * static_cast<double>(c.row_height);
    svg += "<rect class=\"blocked\" x=\"" + Num(left) + "\" y=\"" + Num(y + 2) + "\" width=\"" +
           Num(pw) + "\" height=\"" + Num(c.row_height - 4.0) +
           "\" fill=\"url(#blocked)\"><title>stage " + std::to_string(s) +
           ": hatched = blocked (waiting on a dependency or the iteration's end)</title></rect>\n";
    svg += "<text x=\"" + Num(left - 8) + "\" y=\"" + Num(y + c.row_height / 2.0 + 4) +
           "\" text-anchor=\"end\">stage " + std::to_string(s) + "</text>\n";
  }
  for (const TimelineBar& b : c.bars) {
    if (!std::isfinite(b.start_s) || !std::isfinite(b.duration_s) || b.stage < 0 ||
        b.stage >= stages) {
      continue;
    }
    const double x = sx(b.start_s), w = std::max(b.duration_s / span * pw, 0.5);
    const double y = top + b.stage * static_cast<double>(c.row_height) + 2;
    svg += "<rect class=\"instruction\" x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" +
           Num(w) + "\" height=\"" + Num(c.row_height - 4.0) + "\" fill=\"" + colour(b.mhz) +
           "\" stroke=\"white\" stroke-width=\"0.5\"><title>" + EscapeXml(b.title) +
           "</title></rect>\n";
    if (!b.label.empty() && w >= LabelWidth(b.label)) {
      const bool dark = (b.mhz - lo) / (hi - lo) < 0.55;
      svg += "<text class=\"bar-label\" x=\"" + Num(x + w / 2) + "\" y=\"" +
             Num(y + c.row_height / 2.0 + 2) +
             "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" + (dark ? "white" : "black") +
             "\" pointer-events=\"none\">" + EscapeXml(b.label) + "</text>\n";
    }
  }
  // Time axis.
  const double axis_y = top + ph + 4;
  const std::vector<double> ticks = NiceTicks(0, span, 8);
  for (double t : ticks) {
    if (t > span * (1 + 1e-9)) break;
    svg += "<line x1=\"" + Num(sx(t)) + "\" y1=\"" + Num(axis_y) + "\" x2=\"" + Num(sx(t)) +
           "\" y2=\"" + Num(axis_y + 5) + "\" stroke=\"#333\"/>\n";
    char label[32];
    std::snprintf(label, sizeof label, "%g s", std::round(t * 1e6) / 1e6);
    svg += "<text x=\"" + Num(sx(t)) + "\" y=\"" + Num(axis_y + 17) + "\" text-anchor=\"middle\">" +
           label + "</text>\n";
  }
  // Legend: the clock scale, and the blocked swatch.
  const double ly = axis_y + 34;
  const int steps = 24;
  const double lw = 240;
  for (int i = 0; i < steps; ++i) {
    svg += "<rect x=\"" + Num(left + lw * i / steps) + "\" y=\"" + Num(ly) + "\" width=\"" +
           Num(lw / steps + 0.5) + "\" height=\"12\" fill=\"" + Viridis((i + 0.5) / steps) +
           "\"/>\n";
  }
  svg += "<text x=\"" + Num(left) + "\" y=\"" + Num(ly + 26) + "\">" + std::to_string(c.min_mhz) +
         " MHz</text>\n";
  svg += "<text x=\"" + Num(left + lw) + "\" y=\"" + Num(ly + 26) + "\" text-anchor=\"end\">" +
         std::to_string(c.max_mhz) + " MHz</text>\n";
  svg += "<text x=\"" + Num(left + lw + 12) + "\" y=\"" + Num(ly + 10) +
         "\">SM clock of each forward (F) and backward (B)</text>\n";
  svg += "<rect x=\"" + Num(left + lw + 330) + "\" y=\"" + Num(ly) +
         "\" width=\"24\" height=\"12\" fill=\"url(#blocked)\" stroke=\"#c8c8c8\"/>\n";
  svg += "<text x=\"" + Num(left + lw + 360) + "\" y=\"" + Num(ly + 10) +
         "\">blocked (waiting)</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace joulepipe::report

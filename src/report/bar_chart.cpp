#include "joulepipe/report/bar_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "joulepipe/report/line_chart.hpp"
#include "svg_text.hpp"

namespace joulepipe::report {

namespace {

std::string Num(double v) {
  return SvgNum(v);
}

double Value(const BarChart& c, std::size_t cat, std::size_t ser, std::size_t seg) {
  if (cat >= c.values.size() || ser >= c.values[cat].size() || seg >= c.values[cat][ser].size()) {
    return 0;
  }
  const double v = c.values[cat][ser][seg];
  return std::isfinite(v) && v > 0 ? v : 0;
}

}  // namespace

std::string RenderBarSvg(const BarChart& c) {
  const double left = 80, right = 20, top = c.subtitle.empty() ? 40 : 58, bottom = 70;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  double most = 0;
  for (std::size_t i = 0; i < c.categories.size(); ++i) {
    for (std::size_t j = 0; j < c.series.size(); ++j) {
      double sum = 0;
      for (std::size_t k = 0; k < c.segments.size(); ++k) sum += Value(c, i, j, k);
      most = std::max(most, sum);
    }
  }
  const std::vector<double> ticks = NiceTicks(0, most > 0 ? most : 1, 5);
  const double top_value = ticks.back();
  auto sy = [&](double v) { return top + ph - v / top_value * ph; };

  std::string svg =
      SvgOpen(c.width, c.height, c.title, c.subtitle,
              "<pattern id=\"lighter\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
              "patternTransform=\"rotate(45)\"><rect width=\"5\" height=\"5\" fill=\"white\" "
              "fill-opacity=\"0.55\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"white\" "
              "stroke-width=\"1.5\"/></pattern>");
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double t : ticks) {
    svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(sy(t)) + "\" x2=\"" + Num(left + pw) +
           "\" y2=\"" + Num(sy(t)) + "\" stroke=\"#eee\"/>\n";
    char label[32];
    std::snprintf(label, sizeof label, "%g", std::round(t / step * 1e6) / 1e6 * step);
    svg += "<text x=\"" + Num(left - 6) + "\" y=\"" + Num(sy(t) + 4) + "\" text-anchor=\"end\">" +
           label + "</text>\n";
  }
  svg += "<text transform=\"translate(18 " + Num(top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + EscapeXml(c.y_label) + "</text>\n";

  const std::size_t groups = std::max<std::size_t>(c.categories.size(), 1);
  const double group_w = pw / groups;
  const double bar_w = group_w * 0.8 / std::max<std::size_t>(c.series.size(), 1);
  for (std::size_t i = 0; i < c.categories.size(); ++i) {
    const double gx = left + i * group_w + group_w * 0.1;
    for (std::size_t j = 0; j < c.series.size(); ++j) {
      const std::string colour = j < c.series_colors.size() ? c.series_colors[j] : "#0072B2";
      double base = 0;
      for (std::size_t k = 0; k < c.segments.size(); ++k) {
        const double v = Value(c, i, j, k);
        const double y0 = sy(base), y1 = sy(base + v);
        const std::string x = Num(gx + j * bar_w), w = Num(bar_w * 0.92);
        char value[64];
        std::snprintf(value, sizeof value, "%.4g", v);
        const std::string title = c.categories[i] + ", " + c.series[j] + ", " + c.segments[k] +
                                  ": " + value + (c.unit.empty() ? "" : " " + c.unit);
        svg += "<rect class=\"bar\" x=\"" + x + "\" y=\"" + Num(y1) + "\" width=\"" + w +
               "\" height=\"" + Num(y0 - y1) + "\" fill=\"" + EscapeXml(colour) + "\"><title>" +
               EscapeXml(title) + "</title></rect>\n";
        if (k > 0) {
          svg += "<rect x=\"" + x + "\" y=\"" + Num(y1) + "\" width=\"" + w + "\" height=\"" +
                 Num(y0 - y1) + "\" fill=\"url(#lighter)\" pointer-events=\"none\"/>\n";
        }
        base += v;
      }
    }
    svg += "<text x=\"" + Num(left + (i + 0.5) * group_w) + "\" y=\"" + Num(top + ph + 16) +
           "\" text-anchor=\"middle\">" + EscapeXml(c.categories[i]) + "</text>\n";
  }
  svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(top + ph) + "\" x2=\"" + Num(left + pw) +
         "\" y2=\"" + Num(top + ph) + "\" stroke=\"#333\"/>\n";
  // Legend: series colours, then the segment styles.
  double lx = left;
  const double ly = top + ph + 40;
  for (std::size_t j = 0; j < c.series.size(); ++j) {
    const std::string colour = j < c.series_colors.size() ? c.series_colors[j] : "#0072B2";
    svg += "<rect x=\"" + Num(lx) + "\" y=\"" + Num(ly - 10) +
           "\" width=\"14\" height=\"12\" fill=\"" + EscapeXml(colour) + "\"/>\n";
    svg += "<text x=\"" + Num(lx + 20) + "\" y=\"" + Num(ly) + "\">" + EscapeXml(c.series[j]) +
           "</text>\n";
    lx += 40 + 7.0 * c.series[j].size();
  }
  for (std::size_t k = 0; k < c.segments.size(); ++k) {
    svg += "<rect x=\"" + Num(lx) + "\" y=\"" + Num(ly - 10) +
           "\" width=\"14\" height=\"12\" fill=\"#555\"/>\n";
    if (k > 0) {
      svg += "<rect x=\"" + Num(lx) + "\" y=\"" + Num(ly - 10) +
             "\" width=\"14\" height=\"12\" fill=\"url(#lighter)\"/>\n";
    }
    svg += "<text x=\"" + Num(lx + 20) + "\" y=\"" + Num(ly) + "\">" +
           EscapeXml(c.segments[k] + (k == 0 ? " (solid)" : " (lighter, hatched)")) + "</text>\n";
    lx += 60 + 7.0 * c.segments[k].size() + 70;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace joulepipe::report

// SVG rendering of LineChart. Layout: a fixed margin around the plot area for
// the title, axis labels and tick labels; the legend sits inside the plot's
// top-right corner.
#include "joulepipe/report/line_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "svg_text.hpp"

namespace joulepipe::report {

std::string EscapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

namespace {

std::string Escape(const std::string& text) {
  return EscapeXml(text);
}

std::string Num(double v) {
  return SvgNum(v);
}

// Tick label: as few digits as the step needs.
std::string TickLabel(double v, double step) {
  int decimals = 0;
  while (decimals < 6 && std::fabs(step * std::pow(10.0, decimals) -
                                   std::round(step * std::pow(10.0, decimals))) > 1e-6) {
    ++decimals;
  }
  if (std::fabs(v) < step * 1e-9) v = 0;  // no "-0"
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  // A span below the values' own resolution (two times that differ in the
  // last bits) would give a step smaller than an ulp, and `t += step` would
  // never reach hi: such a range is drawn as one value.
  const double scale = std::max(std::fabs(lo), std::fabs(hi));
  if (hi - lo <= scale * 1e-9) {
    const double pad = scale == 0 ? 1 : scale * 0.05;
    lo -= pad;
    hi += pad;
  }
  target = std::clamp(target, 1, 1000);
  const double raw = (hi - lo) / target;
  if (!std::isfinite(raw) || raw <= 0) return {lo, hi};  // a span past the doubles' range
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  // Ticks by index, not by adding steps up: the count is known (at most
  // target + 2, since step >= raw), whatever rounding does.
  const double first_index = std::floor(lo / step + 1e-9);
  const double count = std::ceil(hi / step - 1e-9) - first_index;
  const int n = static_cast<int>(std::clamp(count, 1.0, static_cast<double>(target) + 2));
  std::vector<double> ticks;
  ticks.reserve(n + 1);
  for (int k = 0; k <= n; ++k) ticks.push_back((first_index + k) * step);
  return ticks;
}

std::string RenderSvg(const LineChart& chart) {
  const double w = chart.width, h = chart.height;
  const double left = 80, right = 20, top = chart.subtitle.empty() ? 40 : 58, bottom = 55;
  const double pw = w - left - right, ph = h - top - bottom;

  Range xr, yr;
  for (const Series& s : chart.series) {
    for (const XY& p : s.points) {
      if (std::isfinite(p.x) && std::isfinite(p.y)) {
        xr.Add(p.x);
        yr.Add(p.y);
      }
    }
  }
  for (const Marker& m : chart.markers) {
    if (std::isfinite(m.at.x) && std::isfinite(m.at.y)) {
      xr.Add(m.at.x);
      yr.Add(m.at.y);
    }
  }
  for (const VerticalLine& v : chart.vertical_lines) xr.Add(v.x);

  std::string svg = SvgOpen(w, h, chart.title, chart.subtitle);
  if (xr.empty() || yr.empty()) {
    svg += "<text x=\"" + Num(w / 2) + "\" y=\"" + Num(h / 2) +
           "\" text-anchor=\"middle\" fill=\"#555\">no data</text>\n</svg>\n";
    return svg;
  }

  const std::vector<double> xt = NiceTicks(xr.lo, xr.hi, 6);
  const std::vector<double> yt = NiceTicks(yr.lo, yr.hi, 5);
  const double x0 = xt.front(), x1 = xt.back(), y0 = yt.front(), y1 = yt.back();
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  auto sx = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto sy = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };

  // Grid, ticks and axes.
  for (double t : xt) {
    svg += "<line x1=\"" + Num(sx(t)) + "\" y1=\"" + Num(top) + "\" x2=\"" + Num(sx(t)) +
           "\" y2=\"" + Num(top + ph) + "\" stroke=\"#eee\"/>\n";
    svg += "<text x=\"" + Num(sx(t)) + "\" y=\"" + Num(top + ph + 16) +
           "\" text-anchor=\"middle\">" + TickLabel(t, xstep) + "</text>\n";
  }
  for (double t : yt) {
    svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(sy(t)) + "\" x2=\"" + Num(left + pw) +
           "\" y2=\"" + Num(sy(t)) + "\" stroke=\"#eee\"/>\n";
    svg += "<text x=\"" + Num(left - 6) + "\" y=\"" + Num(sy(t) + 4) + "\" text-anchor=\"end\">" +
           TickLabel(t, ystep) + "</text>\n";
  }
  svg += "<rect class=\"frame\" x=\"" + Num(left) + "\" y=\"" + Num(top) + "\" width=\"" + Num(pw) +
         "\" height=\"" + Num(ph) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  svg += "<text x=\"" + Num(left + pw / 2) + "\" y=\"" + Num(h - 12) +
         "\" text-anchor=\"middle\">" + Escape(chart.x_label) + "</text>\n";
  svg += "<text transform=\"translate(18 " + Num(top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + Escape(chart.y_label) + "</text>\n";

  for (const VerticalLine& v : chart.vertical_lines) {
    if (!std::isfinite(v.x)) continue;
    svg += "<line x1=\"" + Num(sx(v.x)) + "\" y1=\"" + Num(top) + "\" x2=\"" + Num(sx(v.x)) +
           "\" y2=\"" + Num(top + ph) + "\" stroke=\"" + Escape(v.color) +
           "\" stroke-dasharray=\"4 4\"/>\n";
    // Labels sit half-way up (frontiers leave that area empty), on the side
    // of the line that keeps them inside the plot.
    const bool flip = sx(v.x) > left + pw * 0.7;
    svg += "<text x=\"" + Num(flip ? sx(v.x) - 4 : sx(v.x) + 4) + "\" y=\"" + Num(top + ph / 2) +
           "\" text-anchor=\"" + (flip ? "end" : "start") + "\" fill=\"" + Escape(v.color) + "\">" +
           Escape(v.label) + "</text>\n";
  }

  for (const Series& s : chart.series) {
    std::string path;
    for (const XY& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      path += (path.empty() ? "M" : " L") + Num(sx(p.x)) + " " + Num(sy(p.y));
    }
    if (path.empty()) continue;
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + Escape(s.color) +
           "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    const bool titled = s.titles.size() == s.points.size();
    if (s.dots || titled) {
      for (std::size_t i = 0; i < s.points.size(); ++i) {
        const XY& p = s.points[i];
        if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
        svg += "<circle cx=\"" + Num(sx(p.x)) + "\" cy=\"" + Num(sy(p.y)) + "\" r=\"" +
               (titled && !s.dots ? "3\" fill-opacity=\"0.35" : "2") + "\" fill=\"" +
               Escape(s.color) + "\"";
        svg += titled ? "><title>" + Escape(s.titles[i]) + "</title></circle>\n" : "/>\n";
      }
    }
  }

  // Marker labels that would overlap an earlier one move down a line.
  std::vector<XY> placed;
  std::vector<XY> circles;
  for (const Marker& m : chart.markers) {
    if (!std::isfinite(m.at.x) || !std::isfinite(m.at.y)) continue;
    const double cx = sx(m.at.x), cy = sy(m.at.y);
    const double width = 7.0 * static_cast<double>(m.label.size()) + 8;
    double label_y = cy - 8;
    for (bool moved = true; moved;) {
      moved = false;
      for (const XY& p : placed) {
        if (std::fabs(p.y - label_y) < 13 && std::fabs(p.x - cx) < width) {
          label_y = p.y + 14;
          moved = true;
        }
      }
    }
    placed.push_back({cx, label_y});
    // A marker on (or within a few pixels of) earlier ones is a wider ring
    // around them, so none hides another (the straggler's S sat under C).
    int under = 0;
    for (const XY& c : circles) {
      if (std::hypot(c.x - cx, c.y - cy) < 8) ++under;
    }
    circles.push_back({cx, cy});
    svg += "<circle class=\"marker\" cx=\"" + Num(cx) + "\" cy=\"" + Num(cy) + "\" r=\"" +
           Num(5 + 4 * under) + "\" fill=\"white\" fill-opacity=\"0.01\" stroke=\"" +
           Escape(m.color) + "\" stroke-width=\"2\"><title>" +
           Escape(m.title.empty() ? m.label : m.title) + "</title></circle>\n";
    // Labels go right of the point unless that would leave the plot.
    const bool flip = cx > left + pw * 0.7;
    const double gap = 8 + 4 * under;  // clear of its ring
    svg += "<text class=\"marker-label\" x=\"" + Num(flip ? cx - gap : cx + gap) + "\" y=\"" +
           Num(label_y) + "\" text-anchor=\"" + (flip ? "end" : "start") + "\" fill=\"" +
           Escape(m.color) + "\">" + Escape(m.label) + "</text>\n";
  }

  // Legend, top right inside the plot, as wide as its longest label: at
  // 12 px sans-serif a character is at most about 7 px wide on average (a
  // fixed 170 px let "frontier plans (hover for figures)" run past the
  // frame). tests/report/browser_check.py checks it on the drawn page.
  std::size_t longest = 0;
  for (const Series& s : chart.series) longest = std::max(longest, s.label.size());
  const double legend_w = 30 + 7.0 * static_cast<double>(longest);
  const double lx = std::max(left + 8, left + pw - 8 - legend_w);
  double ly = top + 16;
  for (const Series& s : chart.series) {
    if (s.label.empty()) continue;
    svg += "<line x1=\"" + Num(lx) + "\" y1=\"" + Num(ly - 4) + "\" x2=\"" + Num(lx + 24) +
           "\" y2=\"" + Num(ly - 4) + "\" stroke=\"" + Escape(s.color) + "\" stroke-width=\"2\"" +
           (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    svg += "<text class=\"legend\" x=\"" + Num(lx + 30) + "\" y=\"" + Num(ly) + "\">" +
           Escape(s.label) + "</text>\n";
    ly += 16;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace joulepipe::report

#include "joulepipe/report/line_chart.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace joulepipe::report {
namespace {

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

TEST(NiceTicks, CoverTheRangeWithNiceSteps) {
  const std::vector<double> ticks = NiceTicks(13.27, 17.9, 6);
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_LE(ticks.front(), 13.27);
  EXPECT_GE(ticks.back(), 17.9);
  const double step = ticks[1] - ticks[0];
  EXPECT_DOUBLE_EQ(step, 1.0);
  for (std::size_t i = 1; i < ticks.size(); ++i) EXPECT_NEAR(ticks[i] - ticks[i - 1], step, 1e-12);
}

TEST(NiceTicks, DegenerateAndReversedRanges) {
  const std::vector<double> same = NiceTicks(5, 5, 5);
  ASSERT_GE(same.size(), 2u);
  EXPECT_LT(same.front(), 5);
  EXPECT_GT(same.back(), 5);
  const std::vector<double> reversed = NiceTicks(10, 0, 5);
  EXPECT_LE(reversed.front(), 0);
  EXPECT_GE(reversed.back(), 10);
  EXPECT_TRUE(NiceTicks(std::nan(""), 1, 5).empty());
}

TEST(NiceTicks, RangesNarrowerThanTheirValuesResolutionEnd) {
  // Two frontier times that differ in their last bits (a measured profile
  // whose plans all take the baseline's time) once made the step smaller
  // than an ulp: the loop never reached hi and filled memory.
  for (double at : {4.2e-3, 1.0, 3.7e5, -2.5e-7}) {
    for (double ulps : {1.0, 3.0, 1e3}) {
      const double hi = at + std::fabs(at) * ulps * 2.3e-16;
      const std::vector<double> ticks = NiceTicks(at, hi, 6);
      ASSERT_GE(ticks.size(), 2u) << at;
      EXPECT_LE(ticks.size(), 9u) << at;
      EXPECT_LE(ticks.front(), std::min(at, hi));
      EXPECT_GE(ticks.back(), std::max(at, hi));
    }
  }
  // Huge spans and targets stay bounded too.
  EXPECT_LE(NiceTicks(-1e308, 1e308, 6).size(), 9u);
  EXPECT_LE(NiceTicks(0, 1, 1 << 30).size(), 1003u);
}

TEST(LineChart, DrawsSeriesMarkersAndLines) {
  LineChart chart;
  chart.title = "Frontier <GPT-3 & A100>";
  chart.x_label = "iteration time (s)";
  chart.y_label = "energy (kJ)";
  chart.series.push_back({"frontier", {{1, 10}, {2, 8}, {3, 7.5}}, "#123456", false, true, {}});
  chart.markers.push_back({"chosen", {2, 8}, "#ff0000", {}});
  chart.vertical_lines.push_back({"T'", 2.5, "#00ff00"});
  const std::string svg = RenderSvg(chart);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("Frontier &lt;GPT-3 &amp; A100&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<GPT-3"), std::string::npos);
  EXPECT_EQ(Count(svg, "<path "), 1);
  EXPECT_EQ(Count(svg, "stroke=\"#123456\""), 2);  // the curve and its legend entry
  EXPECT_NE(svg.find(">chosen</text>"), std::string::npos);
  EXPECT_NE(svg.find(">T&apos;</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
}

TEST(LineChart, SkipsNonFinitePointsAndReportsNoData) {
  LineChart chart;
  chart.title = "empty";
  const double inf = std::numeric_limits<double>::infinity();
  chart.series.push_back({"bad", {{inf, 1}, {1, std::nan("")}}, "#1f77b4", false, false, {}});
  const std::string svg = RenderSvg(chart);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);

  chart.series.push_back({"good", {{1, 1}, {2, 2}}, "#1f77b4", false, false, {}});
  const std::string drawn = RenderSvg(chart);
  EXPECT_EQ(drawn.find("no data"), std::string::npos);
  EXPECT_EQ(Count(drawn, "<path "), 1);
}

}  // namespace
}  // namespace joulepipe::report

// The report part's renderers: the clock colour scale, the timeline, the
// bars and the page: what they draw, escaping, and that pages carry no
// script and fetch nothing.
#include <string>

#include <gtest/gtest.h>

#include "joulepipe/report/bar_chart.hpp"
#include "joulepipe/report/html_page.hpp"
#include "joulepipe/report/palette.hpp"
#include "joulepipe/report/timeline_chart.hpp"

namespace joulepipe::report {
namespace {

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(PaletteTest, ViridisRunsFromPurpleToYellowAndClamps) {
  EXPECT_EQ(Viridis(0), "#440154");
  EXPECT_EQ(Viridis(1), "#fde725");
  EXPECT_EQ(Viridis(-3), Viridis(0));
  EXPECT_EQ(Viridis(7), Viridis(1));
  EXPECT_EQ(Viridis(0.5), "#21908d");
}

TEST(TimelineChartTest, OneBarPerInstructionColouredByClockWithTitles) {
  TimelineChart c;
  c.title = "a <plan>";
  c.stages = 2;
  c.time_s = 3;
  c.min_mhz = 1000;
  c.max_mhz = 2000;
  c.bars = {{0, 0, 1, 1000, "F0", "slow"},
            {1, 1, 1, 2000, "F0", "fast"},
            {1, 2, 0.5, 1500, "B0", "mid"},
            {5, 0, 1, 1000, "F9", "stage out of range"}};
  const std::string svg = RenderTimelineSvg(c);
  EXPECT_EQ(Count(svg, "class=\"instruction\""), 3u);
  EXPECT_EQ(Count(svg, "class=\"blocked\""), 2u);  // one band per stage
  EXPECT_NE(svg.find("fill=\"" + Viridis(0) + "\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"" + Viridis(1) + "\""), std::string::npos);
  EXPECT_NE(svg.find("<title>mid</title>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;plan&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("stage out of range"), std::string::npos);
  EXPECT_NE(svg.find("1000 MHz"), std::string::npos);
}

TEST(BarChartTest, StacksSegmentsPerSeriesAndCategory) {
  BarChart c;
  c.categories = {"stage 0", "stage 1"};
  c.series = {"base", "plan"};
  c.segments = {"busy", "blocked"};
  c.values = {{{2, 1}, {1.5, 0.5}}, {{2, 0}, {-1, 1}}};
  c.unit = "kJ";
  const std::string svg = RenderBarSvg(c);
  EXPECT_EQ(Count(svg, "class=\"bar\""), 8u);
  EXPECT_NE(svg.find("<title>stage 0, plan, blocked: 0.5 kJ</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>stage 1, plan, busy: 0 kJ</title>"), std::string::npos);
}

TEST(HtmlPageTest, EscapesTextAndFetchesNothing) {
  HtmlPage page;
  page.title = "R&D <report>";
  page.methodology = {{"Figures", "simulated \"here\""}};
  HtmlSection s;
  s.id = "one";
  s.heading = "First";
  s.paragraphs = {"<script>alert(1)</script>"};
  s.svgs = {"<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>"};
  s.tables = {{"caption", {"a", "b"}, {{"1", "<2>"}}, {1}}};
  page.sections = {s};
  const std::string html = RenderHtml(page);
  EXPECT_NE(html.find("<title>R&amp;D &lt;report&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">&lt;2&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"#one\">First</a>"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("@media print"), std::string::npos);
  // No link, source or import to anywhere but the page itself (the SVG
  // namespace is a name, not a request).
  for (const char* fetch : {"src=", "href=\"http", "@import", "url(http"}) {
    EXPECT_EQ(html.find(fetch), std::string::npos) << fetch;
  }
}

}  // namespace
}  // namespace joulepipe::report

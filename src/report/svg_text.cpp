#include "svg_text.hpp"

#include <cstdio>

#include "joulepipe/report/line_chart.hpp"

namespace joulepipe::report {

std::string SvgNum(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  return buffer;
}

std::string SvgOpen(double width, double height, const std::string& title,
                    const std::string& subtitle, const std::string& defs) {
  const std::string w = SvgNum(width), h = SvgNum(height), mid = SvgNum(width / 2);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h +
                    "\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"" +
                    EscapeXml(title) + "\">\n<title>" + EscapeXml(title) + "</title>\n";
  if (!defs.empty()) svg += "<defs>" + defs + "</defs>\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + mid + "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" +
         EscapeXml(title) + "</text>\n";
  if (!subtitle.empty()) {
    svg += "<text x=\"" + mid + "\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">" +
           EscapeXml(subtitle) + "</text>\n";
  }
  return svg;
}

}  // namespace joulepipe::report

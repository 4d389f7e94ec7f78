// What every SVG renderer of the report part writes the same way (private
// to src/report): numbers with two decimals, and a chart's opening: the
// <svg> element with its accessible name, <defs>, a white background and
// the centred title and subtitle.
#pragma once

#include <string>

namespace joulepipe::report {

std::string SvgNum(double v);

// `defs` is inserted as it is inside <defs>...</defs> (omitted when empty).
std::string SvgOpen(double width, double height, const std::string& title,
                    const std::string& subtitle, const std::string& defs = "");

}  // namespace joulepipe::report

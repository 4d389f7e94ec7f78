// HtmlPage: one self-contained HTML report. Inline CSS and inline SVG only:
// no scripts, no fonts, images or styles from anywhere else, so it opens
// offline, reads without JavaScript and prints (a print stylesheet keeps
// each figure on one page).
//
// Contract: every text field is escaped; the `svg` fields are inserted as
// they are (they come from this part's renderers, which escape their text).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace joulepipe::report {

struct HtmlTable {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // Columns right-aligned (numbers); by index.
  std::vector<int> numeric_columns;
};

struct HtmlSection {
  std::string id;  // anchor for the table of contents
  std::string heading;
  std::vector<std::string> paragraphs;  // text
  std::vector<std::string> svgs;        // inline SVG documents, in order
  std::vector<HtmlTable> tables;
};

struct HtmlPage {
  std::string title;
  std::string subtitle;
  // Label -> text pairs in the methodology box at the top (measured or
  // simulated, what the energy covers, sources, version).
  std::vector<std::pair<std::string, std::string>> methodology;
  std::vector<HtmlSection> sections;
  std::string footer;
};

std::string RenderHtml(const HtmlPage& page);

}  // namespace joulepipe::report

#include "joulepipe/report/html_page.hpp"

#include <algorithm>

#include "joulepipe/report/line_chart.hpp"

namespace joulepipe::report {

namespace {

constexpr char kStyle[] = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a;
       max-width: 1060px; margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
.subtitle { color: #555; margin-top: 0; }
h2 { font-size: 1.25rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; margin-top: 2rem; }
.method { border: 1px solid #0072B2; border-left: 6px solid #0072B2; background: #f3f8fc;
          padding: 0.6rem 1rem; margin: 1rem 0; }
.method dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; margin: 0; }
.method dt { font-weight: 600; }
.method dd { margin: 0; }
nav ol { columns: 2; margin: 0.5rem 0; }
figure { margin: 1rem 0; overflow-x: auto; }
svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; margin: 0.8rem 0; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3rem; }
th, td { border-bottom: 1px solid #e2e2e2; padding: 0.3rem 0.7rem; text-align: left; }
th { background: #f5f5f5; }
td.num, th.num { text-align: right; }
footer { color: #666; font-size: 0.85rem; margin-top: 2.5rem; border-top: 1px solid #ddd;
         padding-top: 0.5rem; }
@media print {
  body { max-width: none; margin: 0; }
  nav { display: none; }
  figure, table, .method { break-inside: avoid; }
  h2 { break-after: avoid; }
}
)";

std::string Table(const HtmlTable& t) {
  auto numeric = [&](std::size_t i) {
    return std::find(t.numeric_columns.begin(), t.numeric_columns.end(), static_cast<int>(i)) !=
           t.numeric_columns.end();
  };
  std::string h = "<table>\n";
  if (!t.caption.empty()) h += "<caption>" + EscapeXml(t.caption) + "</caption>\n";
  h += "<thead><tr>";
  for (std::size_t i = 0; i < t.header.size(); ++i) {
    h += std::string(numeric(i) ? "<th scope=\"col\" class=\"num\">" : "<th scope=\"col\">") +
         EscapeXml(t.header[i]) + "</th>";
  }
  h += "</tr></thead>\n<tbody>\n";
  for (const std::vector<std::string>& row : t.rows) {
    h += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      h += std::string(numeric(i) ? "<td class=\"num\">" : "<td>") + EscapeXml(row[i]) + "</td>";
    }
    h += "</tr>\n";
  }
  h += "</tbody>\n</table>\n";
  return h;
}

}  // namespace

std::string RenderHtml(const HtmlPage& page) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may be fetched: no scripts at all, images and styles only inline.
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'; img-src data:\">\n";
  h += "<title>" + EscapeXml(page.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n";
  h += "<body>\n<header>\n<h1>" + EscapeXml(page.title) + "</h1>\n";
  if (!page.subtitle.empty()) h += "<p class=\"subtitle\">" + EscapeXml(page.subtitle) + "</p>\n";
  h += "</header>\n";
  if (!page.methodology.empty()) {
    h += "<section class=\"method\" aria-label=\"methodology\">\n<strong>How these figures were "
         "made</strong>\n<dl>\n";
    for (const auto& [label, text] : page.methodology) {
      h += "<dt>" + EscapeXml(label) + "</dt><dd>" + EscapeXml(text) + "</dd>\n";
    }
    h += "</dl>\n</section>\n";
  }
  h += "<nav aria-label=\"contents\"><ol>\n";
  for (const HtmlSection& s : page.sections) {
    h += "<li><a href=\"#" + EscapeXml(s.id) + "\">" + EscapeXml(s.heading) + "</a></li>\n";
  }
  h += "</ol></nav>\n<main>\n";
  for (const HtmlSection& s : page.sections) {
    h += "<section id=\"" + EscapeXml(s.id) + "\">\n<h2>" + EscapeXml(s.heading) + "</h2>\n";
    for (const std::string& p : s.paragraphs) h += "<p>" + EscapeXml(p) + "</p>\n";
    for (const std::string& svg : s.svgs) h += "<figure>\n" + svg + "</figure>\n";
    for (const HtmlTable& t : s.tables) h += Table(t);
    h += "</section>\n";
  }
  h += "</main>\n";
  if (!page.footer.empty()) h += "<footer>" + EscapeXml(page.footer) + "</footer>\n";
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace joulepipe::report

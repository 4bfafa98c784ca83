// The report's one HTML file: the template of view/web/report.html with uPlot,
// the report's script and styles inline, and the data as JSON.
#include <string>

#include "tensorwire/view/report.hpp"
#include "web_assets.hpp"

namespace tw::view {
namespace {

// Replaces the one @KEY@ of `page` with `text`.
void fill(std::string& page, const std::string& key, const std::string& text) {
  const std::string mark = "@" + key + "@";
  for (std::size_t at = page.find(mark); at != std::string::npos; at = page.find(mark, at + text.size())) page.replace(at, mark.size(), text);
}

std::string html_text(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string report_html(const nlohmann::json& data) {
  std::string page = web::kReportHtml;
  // Inside a <script> element, "</" could end it early: JSON allows "<\/".
  std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (std::size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) json.replace(at, 2, "<\\/");
  std::string title = "tensorwire report";
  if (data.contains("sources") && !data["sources"].empty()) title += ": " + data["sources"][0].value("path", "");
  // The data goes in last: nothing in it is taken for a placeholder.
  fill(page, "TITLE", html_text(title));
  fill(page, "UPLOT_CSS", web::kUplotCss);
  fill(page, "REPORT_CSS", web::kReportCss);
  fill(page, "UPLOT_JS", web::kUplotJs);
  fill(page, "REPORT_JS", web::kReportJs);
  fill(page, "DATA", json);
  return page;
}

}  // namespace tw::view

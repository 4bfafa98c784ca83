#include "tensorwire/view/web_pages.hpp"

#include "web_assets.hpp"

namespace tw::web {
namespace {

// Replaces every @KEY@ of `page` with `text`.
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

std::string report_page(const std::string& json, const std::string& title) {
  std::string page = view::web::kReportHtml;
  // Inside a <script> element, "</" could end it early: JSON allows "<\/".
  std::string data = json;
  for (std::size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) data.replace(at, 2, "<\\/");
  // The data goes in last: nothing in it is taken for a placeholder.
  fill(page, "TITLE", html_text(title));
  fill(page, "UPLOT_CSS", view::web::kUplotCss);
  fill(page, "REPORT_CSS", view::web::kReportCss);
  fill(page, "UPLOT_JS", view::web::kUplotJs);
  fill(page, "REPORT_JS", view::web::kReportJs);
  fill(page, "DATA", data);
  return page;
}

std::string dashboard_page() {
  std::string page = view::web::kDashboardHtml;
  fill(page, "UPLOT_CSS", view::web::kUplotCss);
  fill(page, "REPORT_CSS", view::web::kReportCss);
  fill(page, "UPLOT_JS", view::web::kUplotJs);
  fill(page, "DASHBOARD_JS", view::web::kDashboardJs);
  return page;
}

}  // namespace tw::web

#include "tensorwire/view/web_pages.hpp"

#include <map>

#include "web_assets.hpp"

namespace tw::web {
namespace {

// The template with each @KEY@ replaced by its text, in one pass over the
// template only: nothing inserted is read again for placeholders.
std::string fill(const std::string& page, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(page.size());
  std::size_t at = 0;
  while (at < page.size()) {
    const std::size_t open = page.find('@', at);
    if (open == std::string::npos) break;
    const std::size_t close = page.find('@', open + 1);
    const auto v = close == std::string::npos ? values.end() : values.find(page.substr(open + 1, close - open - 1));
    if (v == values.end()) {
      out.append(page, at, open + 1 - at);
      at = open + 1;
      continue;
    }
    out.append(page, at, open - at);
    out += v->second;
    at = close + 1;
  }
  out.append(page, at, std::string::npos);
  return out;
}

// JSON inside a <script> element: "<", ">" and "&" as \u escapes, so that no
// "</script>" or "<!--" in the data can end or hide the element.
std::string script_json(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (const char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
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
  return fill(view::web::kReportHtml, {{"TITLE", html_text(title)},
                                       {"UPLOT_CSS", view::web::kUplotCss},
                                       {"REPORT_CSS", view::web::kReportCss},
                                       {"UPLOT_JS", view::web::kUplotJs},
                                       {"COMMON_JS", view::web::kCommonJs},
                                       {"REPORT_JS", view::web::kReportJs},
                                       {"DATA", script_json(json)}});
}

std::string dashboard_page() {
  return fill(view::web::kDashboardHtml, {{"UPLOT_CSS", view::web::kUplotCss},
                                          {"REPORT_CSS", view::web::kReportCss},
                                          {"UPLOT_JS", view::web::kUplotJs},
                                          {"COMMON_JS", view::web::kCommonJs},
                                          {"DASHBOARD_JS", view::web::kDashboardJs}});
}

}  // namespace tw::web

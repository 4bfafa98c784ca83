// The pages' assets, compiled in by view/embed.cmake (uPlot from npm, the rest
// from view/web/).
#pragma once

namespace tw::view::web {
extern const char* const kUplotJs;
extern const char* const kUplotCss;
extern const char* const kReportHtml;
extern const char* const kReportJs;
extern const char* const kCommonJs;
extern const char* const kReportCss;
extern const char* const kDashboardHtml;
extern const char* const kDashboardJs;
}  // namespace tw::view::web

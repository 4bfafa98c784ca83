// The pages' assets, compiled in by view/embed.cmake (uPlot from npm, the rest
// from view/web/).
#pragma once

namespace tw::view::web {
extern const char* const kUplotJs;
extern const char* const kUplotCss;
extern const char* const kReportHtml;
extern const char* const kReportJs;
extern const char* const kReportCss;
}  // namespace tw::view::web

// The pages tensorwire serves or writes, each one self-contained: the report
// (with its data inside) and the controller's live dashboard. Their scripts and
// styles, and uPlot from npm, are compiled in at build time (view/embed.cmake).
// A library of its own (tw_web) so that the controller links the pages alone.
#pragma once

#include <string>

namespace tw::web {

// The report's HTML with `json` (the report's data) inside and `title` escaped.
std::string report_page(const std::string& json, const std::string& title);

// The live dashboard: a static page (no run data in it) that reads the token
// from its URL's fragment, then follows /api/feed and /api/runs/ID.
std::string dashboard_page();

}  // namespace tw::web

// `tensorwire report`: one self-contained HTML file of plots for a capture, a
// run or a built profile, optionally against its original (docs/report.md).
// The data is computed here, from the same readers as `view` and `compare`; the
// page (view/web/, with uPlot bundled at build time) only draws it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tw::view {

struct ReportOptions {
  std::vector<std::string> sources;  // capture directories (one per host), a run directory, or a profile
  std::vector<std::string> against;  // the same for the original; empty: none
  std::size_t top = 10;              // rows in the top flows and messages tables
  bool analyze = true;               // the diagnosis of `sources` (tensorwire analyze) in its section
};

// What the page plots, as JSON (docs/report.md lists the fields). Throws
// std::runtime_error naming the file that is missing or malformed.
nlohmann::json report_data(const ReportOptions& o);

// The page: the template with its scripts and styles inline and `data` in it.
std::string report_html(const nlohmann::json& data);

}  // namespace tw::view

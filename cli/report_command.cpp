// `tensorwire report SOURCE [--against ORIGINAL] -o report.html`: one
// self-contained HTML file of plots (docs/report.md).
#include <fmt/core.h>

#include <memory>

#include "command.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/output_check.hpp"
#include "tensorwire/view/report.hpp"

namespace tw::cli {
namespace {

struct ReportArgs {
  view::ReportOptions options;
  std::string out;
  bool json = false;
};

int report_command(const ReportArgs& a) {
  {
    std::vector<std::string> inputs = a.options.sources;
    inputs.insert(inputs.end(), a.options.against.begin(), a.options.against.end());
    check_output_path(a.out, inputs);
  }
  const nlohmann::json data = view::report_data(a.options);
  const std::string text = a.json ? json_text(data, 1) + "\n" : view::report_html(data);
  write_file_atomic(a.out, text);
  std::size_t messages = 0;
  for (const auto& s : data["sources"]) messages += s.value("messages", std::size_t{0});
  fmt::print(stderr, "tensorwire report: {} source{}, {} messages, in {} ({} KiB{})\n", data["sources"].size(), data["sources"].size() == 1 ? "" : "s",
             messages, a.out, text.size() / 1024, a.json ? "" : "; it fetches nothing: open it anywhere");
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* c = app.add_subcommand("report", "Write one self-contained HTML report of plots for a capture, a run or a built profile");
  c->footer(
      "  tensorwire report CAPTURE_DIR... | RUN_DIR | PROFILE.yaml [--against ORIGINAL...] -o report.html\n"
      "Plots: per-iteration time (against the original's), throughput between ranks, the latency of each\n"
      "message stage (queued in the stack, on the wire, awaiting the ACK, end to end), one iteration as a\n"
      "timeline, where each rank's time went (compute, sending, waiting), message sizes, the top flows and\n"
      "slowest messages. A run against\n"
      "what it replayed has compare's figures too. The file holds its scripts and data: it is readable\n"
      "offline and fetches nothing. docs/report.md says how each figure is computed.");
  c->add_option("sources", a->options.sources, "Capture directories (one per host), a run directory, or a built profile")->required();
  c->add_option("--against", a->options.against, "The original (capture directories, a profile or a run) to plot beside it");
  c->add_option("-o,--out", a->out, "The HTML file to write")->required();
  c->add_option("--top", a->options.top, "Rows in the top flows and slowest messages tables")->capture_default_str()->check(CLI::Range(1, 1000));
  c->add_flag("--json", a->json, "Write the report's data as JSON instead of the page");
  c->add_flag("!--no-analysis", a->options.analyze, "Leave out the diagnosis (tensorwire analyze) of the sources");
  c->callback([&action, a] { action = [a] { return report_command(*a); }; });
}

}  // namespace tw::cli

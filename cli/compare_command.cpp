// `tensorwire compare ORIGINAL REPLAY`.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "tensorwire/analysis/compare_file.hpp"

namespace tw::cli {
namespace {

struct CompareArgs {
  std::string original;
  std::string replay;
  bool json = false;
  double max_error = -1;
};

int compare_command(const CompareArgs& a) {
  const CompareResult r = compare_original(a.original, a.replay);
  const Comparison& c = r.comparison;
  if (c.iterations == 0 || c.iteration_pct.n == 0) {
    throw std::runtime_error("nothing to compare: " + a.replay + " and " + a.original + " have no iteration in common");
  }
  const bool over = a.max_error >= 0 && std::abs(c.median_iteration_error_pct()) > a.max_error;
  if (a.json) {
    nlohmann::json j = compare_result_json(r);
    if (a.max_error >= 0) j["max_error_pct"] = a.max_error, j["within_max_error"] = !over;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", comparison_text(r.profile, c));
    if (!r.note.empty()) fmt::print("\n{}\n", r.note);
  }
  if (over) {
    fmt::print(stderr, "tensorwire compare: median iteration-time error {:+.1f}% is beyond --max-error {}%\n",
               c.median_iteration_error_pct(), a.max_error);
    return 1;
  }
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* c = app.add_subcommand("compare", "Hold a replay against its original: iteration, message, flow and dependency timing");
  c->footer(
      "ORIGINAL is a profile with observed timings, another run directory, or a profile without them (then\n"
      "the reference is the profile's plan: each op's planned start, and the iteration time's lower bound\n"
      "at the link rate the replay measured). Errors are replay minus reference.");
  c->add_option("original", a->original, "Profile (YAML) or run directory")->required();
  c->add_option("replay", a->replay, "Run directory of the replay")->required();
  c->add_flag("--json", a->json, "Machine-readable output");
  c->add_option("--max-error", a->max_error, "Exit 1 when |median iteration-time error| is above this many percent");
  c->callback([&action, a] { action = [a] { return compare_command(*a); }; });
}

}  // namespace tw::cli

// `tensorwire compare ORIGINAL REPLAY`.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "tensorwire/analysis/compare_file.hpp"
#include "tensorwire/analysis/sources.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/profile/build.hpp"
#include "tensorwire/util/printable.hpp"

namespace tw::cli {
namespace {

namespace fs = std::filesystem;

struct CompareArgs {
  std::string original;
  std::string replay;
  bool json = false;
  double max_error = -1;
};

// ORIGINAL a capture directory: the profile the run replayed is built from it
// again, with the options the run's profile names, and must have the same ops.
CompareResult compare_capture(const std::string& capture, const std::string& replay_dir) {
  const LoadedRun run = load_run(replay_dir);
  BuildCommand cmd = parse_build_command(run.profile.metadata.generator);
  if (cmd.dirs.empty() || std::find(cmd.dirs.begin(), cmd.dirs.end(), capture) == cmd.dirs.end()) cmd.dirs = {capture};
  // The other hosts' captures the profile was built from are read too, named by
  // the run's profile: each must be a capture directory (the profile may be
  // forged, and a directory it names that is none was read as one, the error not
  // saying where the path came from).
  for (const std::string& dir : cmd.dirs) {
    if (dir != capture && !is_capture_dir(dir)) {
      throw std::runtime_error(run_profile_path(replay_dir) + ": its generator names " + printable(dir) +
                               " among the captures it was built from, which is no capture directory here (run compare where "
                               "the profile was built, or compare with the profile: tensorwire compare PROFILE " + replay_dir + ")");
    }
  }
  const BuiltProfile b = build_profile(read_captures(cmd.dirs), cmd.options);
  bool same = b.profile.ops.size() == run.profile.ops.size();
  for (std::size_t i = 0; same && i < b.profile.ops.size(); ++i) same = b.profile.ops[i].id == run.profile.ops[i].id;
  if (!same) {
    throw std::runtime_error(replay_dir + " did not replay a profile built from " + capture +
                             ": compare it with the profile it replayed (tensorwire compare PROFILE " + replay_dir + ")");
  }
  CompareResult r = compare_with_profile(b.profile, run);
  r.note = "reference: the capture in " + capture + ", built again as " + (run.profile.metadata.generator.empty() ? "profile build" : run.profile.metadata.generator);
  return r;
}

int compare_command(const CompareArgs& a) {
  // A failed run is no replay of the original, whatever records it left: held
  // against it, its timings passed for a result (exit 0, the failure unsaid).
  if (fs::is_directory(a.replay)) {
    if (const std::string failure = run_failure(a.replay); !failure.empty()) {
      throw std::runtime_error(a.replay + ": the run failed (" + failure +
                               "): nothing to compare; `tensorwire results rates` and `tensorwire view` show what its ranks measured");
    }
  }
  const CompareResult r = is_capture_dir(a.original) ? compare_capture(a.original, a.replay) : compare_original(a.original, a.replay);
  const Comparison& c = r.comparison;
  if (c.iterations == 0 || c.iteration_pct.n == 0) {
    throw std::runtime_error("nothing to compare: " + a.replay + " and " + a.original + " have no iteration in common");
  }
  const bool over = a.max_error >= 0 && std::abs(c.median_iteration_error_pct()) > a.max_error;
  if (a.json) {
    nlohmann::json j = compare_result_json(r);
    if (a.max_error >= 0) j["max_error_pct"] = a.max_error, j["within_max_error"] = !over;
    fmt::print("{}\n", json_text(j, 2));
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
      "ORIGINAL is a capture directory (the profile the run replayed is built from it again, with the options its\n"
      "metadata.generator names), a profile with observed timings (one that `profile build` wrote), another run\n"
      "directory, or a synthesised profile (then the reference is the timing model: the profile simulated at the\n"
      "rates each rank's link reached in the replay, and the lower bound no replay can beat is printed apart).\n"
      "Errors are replay minus reference.");
  c->add_option("original", a->original, "Capture directory, profile (YAML) or run directory")->required();
  c->add_option("replay", a->replay, "Run directory of the replay")->required();
  c->add_flag("--json", a->json, "Machine-readable output");
  c->add_option("--max-error", a->max_error, "Exit 1 when |median iteration-time error| is above this many percent")
      ->check(finite_range(0.0, 1e9));
  c->callback([&action, a] { action = [a] { return compare_command(*a); }; });
}

}  // namespace tw::cli

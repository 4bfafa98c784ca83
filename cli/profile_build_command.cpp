// `tensorwire profile build CAPTURE_DIR... -o job.yaml`.
#include <fmt/core.h>

#include <charconv>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/profile/build.hpp"
#include "tensorwire/core/output_check.hpp"

namespace tw::cli {
namespace {

struct BuildArgs {
  std::vector<std::string> dirs;
  std::string out;
  std::string iterations;
  bool keep_control = false;
  bool json = false;
  bool typical = false;
  double compute_min_us = 20;
};

std::pair<std::int64_t, std::int64_t> parse_range(const std::string& text) {
  const auto colon = text.find(':');
  std::int64_t a = 0, b = 0;
  const auto num = [](std::string_view s, std::int64_t& v) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
  };
  if (colon == std::string::npos || !num(std::string_view(text).substr(0, colon), a) ||
      !num(std::string_view(text).substr(colon + 1), b) || a < 0 || b <= a) {
    throw std::invalid_argument("--iterations " + text + ": expected A:B with 0 <= A < B");
  }
  return {a, b};
}

int run_build(const BuildArgs& a, const std::string& command_line) {
  BuildOptions o;
  if (!a.iterations.empty()) o.iterations = parse_range(a.iterations);
  o.keep_control = a.keep_control;
  if (!(a.compute_min_us >= 0) || a.compute_min_us > 1e6) throw std::invalid_argument("--compute-min-us must be from 0 to 1000000");
  o.compute_min = static_cast<Nanos>(a.compute_min_us * 1e3);
  o.per_iteration = !a.typical;
  o.generator = command_line;
  check_output_path(a.out, a.dirs);
  const BuiltProfile b = build_profile(read_captures(a.dirs), o);
  const std::string sidecar = save_profile_with_sidecar(b.profile, a.out, kInlineObservedOps);
  if (a.json) {
    nlohmann::json j = build_report_json(b.report);
    j["profile"] = a.out;
    if (!sidecar.empty()) j["observed_file"] = sidecar;
    std::cout << json_text(j, 2) << "\n";
    return 0;
  }
  fmt::print("{}", build_report_text(b.report));
  fmt::print("{}: {} ranks, {} flows, {} ops per iteration, {} iterations{}\n", a.out, b.profile.ranks.size(),
             b.profile.flows.size(), b.profile.ops.size(), b.profile.iterations,
             sidecar.empty() ? "" : "; observed timings in " + sidecar);
  return 0;
}

}  // namespace

void add_profile_build_command(CLI::App& profile, Action& action) {
  auto a = std::make_shared<BuildArgs>();
  CLI::App* b = profile.add_subcommand("build", "Build a profile from the captures of a real job (tensorwire capture)");
  b->add_option("captures", a->dirs, "Capture directories: one, or one per host")->required()->check(CLI::ExistingDirectory);
  b->add_option("-o,--out", a->out, "Profile to write (YAML; observed timings beyond 20,000 rows go to OUT-STEM.observed.csv)")
      ->required();
  b->add_option("--iterations", a->iterations, "A:B: use the job's iterations A to B-1 (default: the longest steady run)");
  b->add_flag("--keep-control", a->keep_control,
              "Keep the connections between ranks that are not part of the per-iteration schedule (rendezvous store, heartbeats)");
  b->add_option("--compute-min-us", a->compute_min_us, "A shorter wait before a send is its gap, not a compute op")
      ->capture_default_str();
  b->add_flag("--typical", a->typical,
              "One duration per compute op and one gap per send (their typical values) rather than their values in "
              "each iteration of the capture: a steadier replay without the job's jitter, which also loses what the "
              "jitter cost");
  b->add_flag("--json", a->json, "Print what was found as JSON");
  b->footer(
      "  tensorwire capture --out cap -- python3 train.py ...; tensorwire profile build cap -o job.yaml\n"
      "Ranks come from the launcher's environment (RANK, OMPI_COMM_WORLD_RANK, ...) or the traffic; iterations\n"
      "from tensorwire.annotate marks or the traffic's periodic structure; warm-up iterations are dropped. Each\n"
      "send waits for what it waited for in every iteration; the wait becomes compute time. The profile keeps the\n"
      "capture's timings (observed:), so `tensorwire compare job.yaml RUN` holds a replay against them.\n"
      "Every rule: docs/profile-build.md.");
  b->callback([&action, a] {
    std::string line = "tensorwire profile build";
    for (const auto& d : a->dirs) line += " " + d;
    line += " -o " + a->out;
    if (!a->iterations.empty()) line += " --iterations " + a->iterations;
    if (a->keep_control) line += " --keep-control";
    if (a->typical) line += " --typical";
    if (a->compute_min_us != 20) line += fmt::format(" --compute-min-us {:g}", a->compute_min_us);
    action = [a, line] { return run_build(*a, line); };
  });
}

}  // namespace tw::cli

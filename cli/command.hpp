// How subcommands plug into the one `tensorwire` binary: each add_*_command adds
// its CLI11 subcommands; the one the user picks stores its action, which main runs
// after parsing and whose return value is the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

namespace tw::cli {

using Action = std::function<int()>;

// CLI::Range for a number that also refuses NaN and the infinities, which
// CLI::Range lets through (every comparison with NaN is false): `--max-error nan`
// turned the gate off, `--delay-us 1e300` became a negative delay.
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
          return "must be a number from " + CLI::detail::to_string(lo) + " to " + CLI::detail::to_string(hi) + ", not " + text;
        }
        return {};
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

void add_profile_command(CLI::App& app, Action& action);
void add_profile_build_command(CLI::App& profile, Action& action);  // under `profile`
void add_agent_commands(CLI::App& app, Action& action);
void add_results_command(CLI::App& app, Action& action);
void add_run_command(CLI::App& app, Action& action);
void add_compare_command(CLI::App& app, Action& action);
void add_testbed_command(CLI::App& app, Action& action);
void add_capture_commands(CLI::App& app, Action& action);
void add_view_command(CLI::App& app, Action& action);
void add_report_command(CLI::App& app, Action& action);
void add_analyze_commands(CLI::App& app, Action& action);  // analyze, simulate

}  // namespace tw::cli

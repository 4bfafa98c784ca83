// How subcommands plug into the one `tensorwire` binary: each add_*_command adds
// its CLI11 subcommands; the one the user picks stores its action, which main runs
// after parsing and whose return value is the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tw::cli {

using Action = std::function<int()>;

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

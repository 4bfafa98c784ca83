#include <fmt/core.h>
#include <signal.h>

#include <filesystem>
#include <new>

#include "command.hpp"
#include "tensorwire/core/diagnostic.hpp"
#include "tensorwire/util/heap.hpp"
#include "tensorwire/util/printable.hpp"

int main(int argc, char** argv) {
  tw::reuse_freed_memory();
  CLI::App app{
      "tensorwire: capture, replay and analyse the network traffic of distributed deep-learning training.\n"
      "Docs: README.md and docs/ in the source tree."};
  app.name("tensorwire");
  app.set_version_flag("--version", std::string(TW_VERSION));
  app.require_subcommand(1);
  app.fallthrough(false);

  tw::cli::Action action;
  tw::cli::add_profile_command(app, action);
  tw::cli::add_agent_commands(app, action);
  tw::cli::add_run_command(app, action);
  tw::cli::add_compare_command(app, action);
  tw::cli::add_testbed_command(app, action);
  tw::cli::add_capture_commands(app, action);
  tw::cli::add_results_command(app, action);
  tw::cli::add_view_command(app, action);
  tw::cli::add_report_command(app, action);
  tw::cli::add_analyze_commands(app, action);

  // A peer or child that goes away is an error to report, not a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!action) {
    // A command group (like `profile`) given without its subcommand.
    for (const CLI::App* sub : app.get_subcommands()) fmt::print(stderr, "{}", sub->help());
    return 2;
  }
  try {
    return action();
  } catch (const tw::InputError& e) {
    for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", tw::printable(d.str()));
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "tensorwire: out of memory: the input or the options ask for more than this machine has\n");
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // "path: reason", as every other error names its file (not the library's
    // "filesystem error: status: Too many levels of symbolic links [path]").
    const std::string path = !e.path1().empty() ? e.path1().string() : e.path2().string();
    fmt::print(stderr, "tensorwire: {}{}\n", tw::printable(path.empty() ? "" : path + ": "), tw::printable(e.code().message()));
    return 1;
  } catch (const std::exception& e) {
    // One line, whatever the message quotes from a file (its control characters escaped).
    fmt::print(stderr, "tensorwire: {}\n", tw::printable(e.what()));
    return 1;
  }
}

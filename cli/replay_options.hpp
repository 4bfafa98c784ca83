// Options shared by `agent`, `replay` and `run`: how agents replay. The options
// land in tw::ReplayOptions; make_run_settings (replayer/launch) decides the rest.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/launch/run_settings.hpp"

namespace tw::cli {

void add_replay_options(CLI::App* app, ReplayOptions& a);

// "RANK:FACTOR" entries of --slow-rank.
std::vector<std::pair<RankId, double>> parse_slow_ranks(const std::vector<std::string>& specs, std::size_t ranks);

}  // namespace tw::cli

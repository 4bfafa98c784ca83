// Options shared by `agent`, `replay` and `run`: how agents replay.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw::cli {

struct ReplayArgs {
  bool open_loop = false;
  double link_gbps = 10;
  double slowdown = 1;
  double spin_us = -1;  // -1: automatic
  double delay_us = 0;
  std::uint64_t iterations = 0;
  bool no_tx_timestamps = false;
  double connect_timeout_s = 30;
  double idle_timeout_s = 60;
};

void add_replay_options(CLI::App* app, ReplayArgs& a);
ExecutorOptions executor_options(const Profile& p, const ReplayArgs& a);

// Seconds from an option, checked to be in (0, 1 day].
Nanos seconds(double s, const char* option);

// The running tensorwire binary (to start agents with).
std::string self_exe();

// "RANK:FACTOR" entries of --slow-rank.
std::vector<std::pair<RankId, double>> parse_slow_ranks(const std::vector<std::string>& specs, std::size_t ranks);

}  // namespace tw::cli

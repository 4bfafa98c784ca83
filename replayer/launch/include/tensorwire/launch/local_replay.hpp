// `tensorwire replay --local N`: one agent process per rank on loopback, set up
// with a roster and listening sockets made here (inherited, so no port races),
// waited for with a deadline, and their summaries merged.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

struct LocalReplayOptions {
  std::string exe;  // the tensorwire binary to run as `agent`
  std::string profile_path;
  std::string out_dir;
  std::vector<std::string> agent_args;  // given to every agent
  std::vector<std::pair<RankId, double>> slow_ranks;  // per-rank --slowdown
  Nanos timeout = 600 * kSecond;
  Nanos start_delay = 500 * kMilli;  // all agents begin at one instant this long after launch
};

struct LocalReplayResult {
  // Job-wide per iteration: from the earliest rank start to the latest rank end
  // (CLOCK_REALTIME ns; one clock, since all agents share this host).
  std::vector<std::pair<Nanos, Nanos>> iterations;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

// Throws std::runtime_error naming the first agent that failed and why.
LocalReplayResult run_local_replay(const Profile& profile, const LocalReplayOptions& options);

// The summary an agent wrote (rank-R.json); throws std::runtime_error naming the
// file if it is missing or not valid JSON.
nlohmann::json read_agent_summary(const std::string& out_dir, RankId rank);

// Merges the per-rank summaries an agent run left in `out_dir`.
LocalReplayResult read_run_summaries(const std::string& out_dir, std::size_t ranks);

}  // namespace tw

// One replay agent: the process that plays one rank of a profile. It listens for
// the flows into its rank, connects the flows out of it, then runs the rank's
// ops (Executor) as real TCP traffic, measures every message, and streams the
// results to disk. docs/results-format.md describes what it writes.
#pragma once

#include <optional>
#include <string>

#include "tensorwire/agent/executor.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/protocol/roster.hpp"

namespace tw {

struct AgentConfig {
  RankId rank = 0;
  std::string profile_path;  // recorded in the summary
  Roster roster;
  std::string out_dir;
  ExecutorOptions executor;
  Nanos spin = 0;  // busy-wait this long before each deadline; 0: timers only
  Nanos connect_timeout = 30 * kSecond;  // to connect every flow and be connected to
  Nanos idle_timeout = 60 * kSecond;  // longest wait without any progress
  Nanos delay = 0;  // emulated one-way latency added to every message this rank receives
  int listen_fd = -1;  // an inherited listening socket instead of binding the roster address
  std::optional<Nanos> start_at;  // CLOCK_REALTIME ns at which to begin iteration 0
  bool tx_timestamps = true;  // SO_TIMESTAMPING on every outgoing flow
  bool quiet = false;
};

// Runs the agent to the end. Returns 0 when every iteration completed; on any
// failure (a peer that closes, resets or sends a bad frame, a connect that times
// out, no progress, a full disk) writes what was measured so far and throws
// std::runtime_error with a one-line message naming the rank, flow and peer.
void run_agent(const Profile& profile, const AgentConfig& config);

// The summary file an agent writes next to its records.
std::string summary_path(const std::string& out_dir, RankId rank);
std::string records_path(const std::string& out_dir, RankId rank);

}  // namespace tw

// One replay agent: the process that plays one rank of a profile. It listens for
// the flows into its rank, connects the flows out of it, then runs the rank's
// ops (Executor) as real TCP traffic, measures every message, and streams the
// results to disk. docs/results-format.md describes what it writes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_slice.hpp"
#include "tensorwire/protocol/roster.hpp"
#include "tensorwire/protocol/run_settings.hpp"
#include "tensorwire/util/unique_fd.hpp"

namespace tw {

// How a controller connection steers a running agent; both are safe to call from
// any thread, also after the agent ended (then they do nothing).
struct AgentSteering {
  std::function<void(Nanos start_realtime)> start;  // begin iteration 0 at this CLOCK_REALTIME instant
  std::function<void(std::string why)> stop;        // end the run as failed, keeping what was measured
};

// What the agent tells its controller connection, called on the agent's thread
// (they must not block). Without a link the agent starts on its own.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual void attach(AgentSteering steering) = 0;  // before the run
  virtual void connected() = 0;  // every flow is up: the agent now waits for start()
  // An iteration ended (CLOCK_REALTIME); bytes: sent so far on each outgoing flow.
  virtual void iteration(std::uint32_t index, Nanos start, Nanos end,
                         const std::vector<std::pair<FlowIndex, std::uint64_t>>& flow_bytes) = 0;
};

struct AgentConfig {
  RankId rank = 0;
  std::string profile_path;  // recorded in the summary
  // When the profile is this rank's slice of a larger one (profile_slice.hpp):
  // the whole profile's op and flow indices (on the wire and in the records)
  // and its digest (what peers compare). Empty / unset: the profile is whole.
  IndexMap ops;
  IndexMap flows;
  std::optional<std::uint64_t> profile_digest;
  Roster roster;  // by rank: only the rank's own entry and its flows' peers are used
  std::string out_dir;
  ExecutorOptions executor;
  Nanos spin = 0;  // busy-wait this long before each deadline; 0: timers only
  Nanos read_gap = 0;  // a flow that ran dry, and that no op waits for, is read again no sooner than this after its last bytes
  Nanos read_nap = 0;  // without a spin, a flow that ran dry amid a long message naps this long, out of epoll
  Nanos connect_timeout = 30 * kSecond;  // to connect every flow and be connected to
  Nanos idle_timeout = 60 * kSecond;  // longest wait without any progress
  Nanos delay = 0;  // emulated one-way latency added to every message this rank receives
  std::vector<Nanos> delay_from;  // and per source rank (empty: none), e.g. per testbed pair
  // An inherited listening socket instead of binding the roster address; run_agent
  // takes it over (and closes it when the rank has no flow in).
  UniqueFd listen_fd;
  std::optional<Nanos> start_at;  // CLOCK_REALTIME ns at which to begin iteration 0
  bool tx_timestamps = true;  // SO_TIMESTAMPING on every outgoing flow
  std::uint32_t tx_stamp_every = 1;  // of every Nth message of a flow
  TxSched tx_sched = TxSched::automatic;
  std::uint32_t io_threads = 1;  // flows spread over this many I/O threads; 0: automatic (run_agent)
  // Agents sharing this machine's cores (automatic I/O threads, --pin); 0: the
  // roster's ranks on this rank's host (run_agent).
  std::uint32_t machine_agents = 0;
  bool pin = false;       // each I/O thread on a core (chosen by rank)
  bool realtime = false;  // I/O threads at SCHED_FIFO, where permitted
  bool sched_batch = false;  // I/O threads at SCHED_BATCH (RunSettings::sched_batch)
  std::string congestion_control;  // of every data socket; empty: the host's default
  bool quiet = false;
  AgentLink* link = nullptr;  // a controller connection, if any
};

// Runs the agent to the end (`profile`: the whole profile, or this rank's slice
// with config.ops and config.profile_digest). Returns 0 when every iteration completed; on any
// failure (a peer that closes, resets or sends a bad frame, a connect that times
// out, no progress, a full disk) writes what was measured so far and throws
// std::runtime_error with a one-line message naming the rank, flow and peer.
// Takes config.listen_fd (left empty); reads the rest. Runs on the calling thread.
void run_agent(const Profile& profile, AgentConfig& config);

}  // namespace tw

// How every agent of a run replays: the `settings` object of the control
// protocol's `setup` message (docs/protocol.md), which the controller fills from
// the command line and each agent turns into its executor's options.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

// When outgoing flows ask for TX_SCHED timestamps (entering the queueing
// discipline): where one can hold packets (auto), always, never.
enum class TxSched { automatic, on, off };
const char* to_string(TxSched s);
// "auto", "on", "off"; nullopt otherwise.
std::optional<TxSched> tx_sched_from(const std::string& s);

struct RunSettings {
  std::uint64_t iterations = 0;  // 0: the profile's
  bool open_loop = false;
  // Open loop: each op's offset within an iteration (indexed like the profile's
  // ops) and the period, planned by the controller (from observed timings or the
  // timing model), so agents need no observed data.
  std::vector<Nanos> open_loop_offsets;
  Nanos open_loop_period = 0;
  Nanos spin = 0;
  // A flow that ran dry is read again no sooner than this after its last read
  // that returned bytes (while it looks again, within its spin); 0: at once.
  Nanos read_gap = 0;
  // Without a spin (spin 0), a flow that ran dry amid a long message naps this
  // long with its I/O thread's others, out of epoll; 0: it sleeps in epoll.
  Nanos read_nap = 0;
  Nanos delay = 0;
  bool tx_timestamps = true;
  std::uint32_t tx_stamp_every = 1;  // transmit timestamps of every Nth message of a flow
  TxSched tx_sched = TxSched::automatic;
  // I/O threads per agent, its flows spread over them; 0: automatic
  // (automatic_io_threads, from the flows the agent drives and its machine's cores).
  std::uint32_t io_threads = 1;
  // How many of the run's agents share this agent's machine, for automatic I/O
  // threads; 0: unknown (the agent counts the roster's ranks on its host).
  std::uint32_t machine_agents = 0;
  bool pin = false;       // each I/O thread on a core of its own (chosen by rank)
  bool realtime = false;  // I/O threads at SCHED_FIFO, where permitted
  // I/O threads at SCHED_BATCH: woken, they wait for the running thread's turn
  // to end instead of preempting it (agents sharing cores pass bytes in fewer,
  // larger turns).
  bool sched_batch = false;
  // Every data socket's TCP congestion control (TCP_CONGESTION); empty: each
  // host's default.
  std::string congestion_control;
  Nanos connect_timeout = 30 * kSecond;
  Nanos idle_timeout = 60 * kSecond;
};

inline constexpr std::uint32_t kMaxIoThreads = 64;
// Automatic I/O threads: one per this many flows an agent drives, in and out.
// One thread drives four flows of 8 MiB messages as fast as iperf3's one
// thread drives four streams (docs/BENCHMARKS.md, Throughput), and a rank of a
// ring or a pipeline (one or two flows each way) keeps every message's hand-over
// to the ops on one thread, without a wake-up between threads.
inline constexpr std::uint32_t kFlowsPerIoThread = 4;

// The I/O threads of an agent that drives `flows` flows on a machine whose
// `cores` it shares with `machine_agents` agents (itself included; 0 counts as
// 1): one per kFlowsPerIoThread flows, at most its share of the cores (at least
// 1, at most kMaxIoThreads).
std::uint32_t automatic_io_threads(std::uint64_t flows, std::uint64_t cores, std::uint64_t machine_agents);
// The longest read gap: a flow spins this long at most before each look.
inline constexpr Nanos kMostReadGap = 1000 * kMicro;
// The longest nap: what arrives meanwhile waits in the socket.
inline constexpr Nanos kMostReadNap = 1000 * kMicro;

nlohmann::json to_json(const RunSettings& s);
// Throws std::runtime_error naming the field on a missing or mistyped one.
RunSettings run_settings_from_json(const nlohmann::json& j);

// The executor options of one rank under these settings.
ExecutorOptions executor_options_for(const RunSettings& s, double slowdown);

}  // namespace tw

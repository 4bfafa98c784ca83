// The what-if simulator: a job-wide discrete-event simulation of a profile's
// rules (docs/profile-format.md, "Execution", closed loop) on a compact graph that
// analyses change freely: a rank's compute stretched or brought to its peers',
// a link's rate or cost per message, a tensor's bytes, the number of ranks.
//
// The agents' Executor holds one rank's state with arrays over every op of the
// profile, which is right for an agent and wrong for 1024 ranks at once; this
// engine keeps one state for the whole job, so memory and time grow with the ops
// and the events, not with ranks x ops. simulator.hpp (Executor-based) stays the
// reference: tests hold the two against each other.
//
// Network model: each flow moves one message at a time. A message holds its flow
// for `per_message` and then for its bits at the flow's rate, or less when ranks
// have links of their own (`rank_links`): then the messages crossing a rank's
// egress or ingress share it max-min fairly, each at most at its flow's rate. It
// arrives `latency` after its last bit left and is handed to its receiver its
// flow's `read_lag` after that; the send completes for its sender when its bits
// have left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {

struct FlowModel {
  double bps = 10e9;  // > 0
  Nanos per_message = 0;  // the flow is held this long before the bits start
  Nanos latency = 0;  // last bit left -> arrival
  Nanos read_lag = 0;  // arrival -> handed to the receiver
  // The path after the sender (socket buffers, the wire, the receiver's reads),
  // one message after another at this rate: a message arrives `latency` after
  // its last bit left or this much after the message before it arrived,
  // whichever is later. 0: no such limit.
  double path_bps = 0;
};

struct SimGraph {
  struct Node {
    OpType type = OpType::compute;
    RankId rank = 0;
    FlowIndex flow = 0;  // send
    Bytes bytes = 0;  // send
    std::uint32_t dep_begin = 0, dep_count = 0;  // into deps
    std::uint32_t dur_begin = 0, dur_count = 0;  // into durations; compute: iteration i takes [dur_begin + i % dur_count]
    std::uint32_t gap_begin = 0, gap_count = 0;  // into gaps; none: 0
    // Send: time its sender spends on it before the bits start, holding the flow
    // (compressing it), and its receiver after the arrival (decompressing it).
    Nanos prep = 0, post = 0;
    // How long after its rank (compute) or flow (send) takes it up the op really
    // starts: an agent's or framework's own delay, measured; iteration i takes
    // [lag_begin + i % lag_count]; none: 0. The rank or flow is held meanwhile.
    std::uint32_t lag_begin = 0, lag_count = 0;
    // Send, optional: the message's own times, as measured, in place of its
    // flow's model: how long it holds the flow (`holds`), and its time on the
    // path after the sender once the message before it has arrived (`paths`):
    // it arrives at max(its last bit out, the previous arrival) + that.
    std::uint32_t hold_begin = 0, hold_count = 0;
    std::uint32_t path_begin = 0, path_count = 0;
  };
  std::uint32_t ranks = 0;
  std::uint64_t iterations = 1;
  bool barrier = true;
  std::vector<Node> ops;
  std::vector<Dependency> deps;
  std::vector<Nanos> durations;
  std::vector<Nanos> gaps;
  std::vector<Nanos> lags;
  std::vector<Nanos> holds, paths;
  std::vector<RankId> flow_src, flow_dst;
  std::vector<FlowModel> flows;
  RankLinks rank_links;  // empty: a flow is limited by its own rate only

  Nanos duration(OpIndex op, std::uint64_t iteration) const {
    const Node& n = ops[op];
    return n.dur_count == 0 ? 0 : durations[n.dur_begin + iteration % n.dur_count];
  }
  Nanos gap(OpIndex op, std::uint64_t iteration) const {
    const Node& n = ops[op];
    return n.gap_count == 0 ? 0 : gaps[n.gap_begin + iteration % n.gap_count];
  }
  Nanos lag(OpIndex op, std::uint64_t iteration) const {
    const Node& n = ops[op];
    return n.lag_count == 0 ? 0 : lags[n.lag_begin + iteration % n.lag_count];
  }
  // Gives op its own table of per-iteration values (copy-on-write: ops sharing
  // one stay unchanged); `table` is durations, gaps, lags, holds or paths, and
  // begin/count the node's fields for it.
  static void set_table(std::vector<Nanos>& table, std::uint32_t& begin, std::uint32_t& count, const std::vector<Nanos>& values);
  // Gives op its own duration table (copy-on-write, so that ops sharing one stay unchanged).
  void set_durations(OpIndex op, const std::vector<Nanos>& per_iteration);
  void set_gaps(OpIndex op, const std::vector<Nanos>& per_iteration);
  void set_lags(OpIndex op, const std::vector<Nanos>& per_iteration);
  void set_holds(OpIndex op, const std::vector<Nanos>& per_iteration);  // empty: the flow's model
  void set_paths(OpIndex op, const std::vector<Nanos>& per_iteration);
  static Nanos cyclic(const std::vector<Nanos>& table, std::uint32_t begin, std::uint32_t count, std::uint64_t i) {
    return count == 0 ? 0 : table[begin + i % count];
  }
};

// The graph of a valid profile: its durations and gaps per iteration, every flow
// at `link` (with the flow's own read lag).
SimGraph sim_graph(const Profile& profile, const FlowModel& link);

// One op instance as simulated. Times are absolute (the job starts at 0).
struct SimInstance {
  Nanos ready = -1;  // its dependencies were met (and its iteration entered)
  Nanos dispatched = -1;  // its rank or flow took it up
  Nanos start = -1;  // compute started / the message took its flow (dispatched + its lag)
  Nanos end = -1;  // compute ended / the last bit left
  Nanos received = -1;  // send: handed to the receiver
  // What set `ready`: the completion of another instance (op, iteration, whether
  // its receipt), or kNoCause for the job's start. Drives the critical path.
  std::uint32_t cause_op = 0, cause_iteration = 0;
  bool cause_recv = false;
  bool has_cause = false;
  // Started later than ready + gap because its rank (compute) or flow (send) was
  // busy: the instance that held it until `start`.
  std::uint32_t held_op = 0, held_iteration = 0;
  bool held = false;
  // At `ready`: since when its rank (compute) or flow (send) had been free, or
  // -1 when it was busy then.
  Nanos idle_from = -1;
};

struct GraphSimOptions {
  bool record = false;  // keep every instance (SimRun::instances)
  std::uint64_t iterations = 0;  // 0: the graph's
};

struct GraphSimRun {
  std::vector<Nanos> iteration_end;  // job-wide: the last rank's end of each iteration
  std::vector<std::vector<Nanos>> rank_iteration_end;  // [rank][iteration]
  Nanos makespan = 0;
  std::uint64_t events = 0;
  std::uint64_t iterations = 0;
  std::vector<SimInstance> instances;  // [op * iterations + iteration] when recorded

  const SimInstance& at(OpIndex op, std::uint64_t iteration) const { return instances[op * iterations + iteration]; }
  // Job-wide iteration times, each from the end of the one before.
  std::vector<Nanos> iteration_times() const;
  // The mean of iteration_times() from iteration `from` on (all when fewer).
  double mean_iteration(std::size_t from = 0) const;
};

// Throws std::runtime_error if the job deadlocks (naming a rank and what it waits
// for), std::invalid_argument for a graph that is not consistent.
GraphSimRun simulate_graph(const SimGraph& graph, const GraphSimOptions& options = {});

}  // namespace tw

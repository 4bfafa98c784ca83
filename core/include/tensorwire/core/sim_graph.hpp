// The compact, job-wide form of a profile that the what-if simulator runs
// (analysis/graph_sim.hpp): plain arrays that an analysis changes freely (a
// rank's compute, a link's model, a tensor's bytes) and that a synthesiser can
// write directly for thousands of ranks without a Profile's strings.
#pragma once

#include <cstdint>
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
  // What only some ops have, kept beside the nodes (Node::extra) so that a node
  // stays small: a 1024-rank ring has 21 million of them, and the time to make
  // the graph is mostly the kernel handing out the pages they fill.
  struct NodeExtra {
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
  static constexpr std::uint32_t kNoExtra = 0xffffffffU;
  struct Node {
    Bytes bytes = 0;  // send
    OpType type = OpType::compute;
    RankId rank = 0;
    FlowIndex flow = 0;  // send
    std::uint32_t priority = 0;  // send: as Op::priority
    std::uint32_t dep_begin = 0, dep_count = 0;  // into deps
    std::uint32_t dur_begin = 0, dur_count = 0;  // into durations; compute: iteration i takes [dur_begin + i % dur_count]
    std::uint32_t gap_begin = 0, gap_count = 0;  // into gaps; none: 0
    std::uint32_t extra = kNoExtra;  // into extras
  };
  static_assert(sizeof(Node) <= 56, "a node per op: keep it small");
  std::uint32_t ranks = 0;
  std::uint64_t iterations = 1;
  bool barrier = true;
  std::vector<Node> ops;
  std::vector<Dependency> deps;
  std::vector<Nanos> durations;
  std::vector<Nanos> gaps;
  std::vector<Nanos> lags;
  std::vector<Nanos> holds, paths;
  std::vector<NodeExtra> extras;
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
    const NodeExtra& x = extra(op);
    return x.lag_count == 0 ? 0 : lags[x.lag_begin + iteration % x.lag_count];
  }
  // An op's extra: the defaults (all 0) when it has none.
  const NodeExtra& extra(OpIndex op) const {
    static const NodeExtra none;
    const std::uint32_t k = ops[op].extra;
    return k == kNoExtra ? none : extras[k];
  }
  // The op's own extra, made when it has none.
  NodeExtra& extra_for(OpIndex op);
  // Every send back on its flow's model: the measured holds and paths dropped.
  void drop_measured_messages() {
    for (NodeExtra& x : extras) x.hold_count = 0, x.path_count = 0;
  }
  // Gives op its own table of per-iteration values (copy-on-write: ops sharing
  // one stay unchanged); `table` is durations, gaps, lags, holds or paths, and
  // begin/count the node's fields for it. Values all equal take one entry; all
  // 0 take none where none means 0 (zero_is_none: gaps, lags; not holds or
  // paths, where none means the flow's model).
  static void set_table(std::vector<Nanos>& table, std::uint32_t& begin, std::uint32_t& count, const std::vector<Nanos>& values,
                        bool zero_is_none);
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

}  // namespace tw

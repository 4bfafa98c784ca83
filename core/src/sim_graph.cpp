#include "tensorwire/core/sim_graph.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

namespace tw {

void SimGraph::set_table(std::vector<Nanos>& table, std::uint32_t& begin, std::uint32_t& count, const std::vector<Nanos>& values,
                         bool zero_is_none) {
  const bool same = std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
  if (values.empty() || (same && zero_is_none && values.front() == 0)) {
    begin = 0, count = 0;
    return;
  }
  // Equal values (a plan's, or a cause brought to its ideal) take one entry:
  // per-iteration tables of every op are looked up at random, one cache line
  // a lookup, and a what-if copies them.
  const std::size_t n = same ? 1 : values.size();
  if (table.size() + n > std::numeric_limits<std::uint32_t>::max()) throw std::length_error("simulation graph: a table over 2^32 entries");
  begin = static_cast<std::uint32_t>(table.size());
  count = static_cast<std::uint32_t>(n);
  table.insert(table.end(), values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
}
void SimGraph::set_durations(OpIndex op, const std::vector<Nanos>& v) { set_table(durations, ops.at(op).dur_begin, ops.at(op).dur_count, v, false); }
void SimGraph::set_gaps(OpIndex op, const std::vector<Nanos>& v) { set_table(gaps, ops.at(op).gap_begin, ops.at(op).gap_count, v, true); }
void SimGraph::set_lags(OpIndex op, const std::vector<Nanos>& v) {
  if (ops.at(op).extra == kNoExtra && std::all_of(v.begin(), v.end(), [](Nanos x) { return x == 0; })) return;  // none, as before
  NodeExtra& x = extra_for(op);
  set_table(lags, x.lag_begin, x.lag_count, v, true);
}
void SimGraph::set_holds(OpIndex op, const std::vector<Nanos>& v) {
  NodeExtra& x = extra_for(op);
  set_table(holds, x.hold_begin, x.hold_count, v, false);
}
void SimGraph::set_paths(OpIndex op, const std::vector<Nanos>& v) {
  NodeExtra& x = extra_for(op);
  set_table(paths, x.path_begin, x.path_count, v, false);
}

SimGraph::NodeExtra& SimGraph::extra_for(OpIndex op) {
  Node& n = ops.at(op);
  if (n.extra == kNoExtra) {
    if (extras.size() >= kNoExtra) throw std::length_error("simulation graph: over 2^32 - 1 ops with extras");
    n.extra = static_cast<std::uint32_t>(extras.size());
    extras.emplace_back();
  }
  return extras[n.extra];
}

SimGraph sim_graph(const Profile& p, const FlowModel& link) {
  SimGraph g;
  g.ranks = static_cast<std::uint32_t>(p.ranks.size());
  g.iterations = p.iterations;
  g.barrier = p.iteration_barrier;
  g.ops.resize(p.ops.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    SimGraph::Node& n = g.ops[i];
    n.type = op.type;
    n.rank = op.rank;
    n.flow = op.flow;
    n.bytes = op.type == OpType::send ? op.bytes : 0;
    n.priority = op.type == OpType::send ? op.priority : 0;
    n.dep_begin = static_cast<std::uint32_t>(g.deps.size());
    n.dep_count = static_cast<std::uint32_t>(op.after.size());
    g.deps.insert(g.deps.end(), op.after.begin(), op.after.end());
    if (op.type == OpType::compute) {
      n.dur_begin = static_cast<std::uint32_t>(g.durations.size());
      if (op.durations.empty()) {
        g.durations.push_back(op.duration);
      } else {
        g.durations.insert(g.durations.end(), op.durations.begin(), op.durations.end());
      }
      n.dur_count = static_cast<std::uint32_t>(g.durations.size() - n.dur_begin);
    }
    if (!op.gaps.empty() || op.gap != 0) {
      n.gap_begin = static_cast<std::uint32_t>(g.gaps.size());
      if (op.gaps.empty()) {
        g.gaps.push_back(op.gap);
      } else {
        g.gaps.insert(g.gaps.end(), op.gaps.begin(), op.gaps.end());
      }
      n.gap_count = static_cast<std::uint32_t>(g.gaps.size() - n.gap_begin);
    }
  }
  for (const Flow& f : p.flows) {
    g.flow_src.push_back(f.src);
    g.flow_dst.push_back(f.dst);
    FlowModel m = link;
    m.read_lag = f.read_lag;
    g.flows.push_back(m);
  }
  return g;
}

}  // namespace tw

#include "tensorwire/analysis/priority.hpp"

#include <algorithm>
#include <stdexcept>

#include "tensorwire/core/dag.hpp"

namespace tw {
namespace {

struct Succ {
  OpIndex op;
  std::uint32_t back;
};

}  // namespace

std::vector<std::uint32_t> urgency_priorities(const Profile& p, const std::vector<FlowModel>& flows) {
  const std::size_t n = p.ops.size();
  const std::vector<OpIndex> order = topological_order(same_iteration_predecessors(p));
  if (order.size() != n) throw std::invalid_argument("the profile's ops form a cycle: no urgency order");
  // Each op's own time: a compute op's duration, a send's transfer, both after its gap.
  std::vector<double> own(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = p.ops[i];
    double t = static_cast<double>(op.mean_gap());
    if (op.type == OpType::compute) {
      t += static_cast<double>(op.mean_duration());
    } else {
      const FlowModel m = op.flow < flows.size() ? flows[op.flow] : FlowModel{};
      t += static_cast<double>(m.per_message + m.latency + m.read_lag) + static_cast<double>(op.bytes) * 8e9 / m.bps;
    }
    own[i] = t;
  }
  std::vector<std::vector<Succ>> succ(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (const Dependency& d : p.ops[i].after) {
      if (d.iterations_back <= 1) succ[d.op].push_back({static_cast<OpIndex>(i), d.iterations_back});
    }
  }
  // Two iterations unrolled: `next` the longest path from an op of the next
  // iteration to its end, `here` from an op of this one to the next's end. An
  // op's next instance waits for this one too.
  std::vector<double> next(n, 0), here(n, 0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    double after = 0;
    for (const Succ& s : succ[*it]) {
      if (s.back == 0) after = std::max(after, next[s.op]);
    }
    next[*it] = own[*it] + after;
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    double after = next[*it];
    for (const Succ& s : succ[*it]) after = std::max(after, s.back == 0 ? here[s.op] : next[s.op]);
    here[*it] = own[*it] + after;
  }
  std::vector<OpIndex> sends;
  for (std::size_t i = 0; i < n; ++i) {
    if (p.ops[i].type == OpType::send) sends.push_back(static_cast<OpIndex>(i));
  }
  std::stable_sort(sends.begin(), sends.end(), [&here](OpIndex a, OpIndex b) { return here[a] > here[b]; });
  // Equal urgency, equal priority: such sends keep their first-ready order.
  std::vector<std::uint32_t> pr(n, 0);
  std::uint32_t rank = 0;
  for (std::size_t k = 0; k < sends.size(); ++k) {
    if (k > 0 && here[sends[k]] != here[sends[k - 1]]) ++rank;
    pr[sends[k]] = rank;
  }
  return pr;
}

std::size_t prioritize_sends(Profile& p, const std::vector<std::uint32_t>& priorities) {
  if (priorities.size() != p.ops.size()) throw std::invalid_argument("priorities for another number of ops");
  std::size_t changed = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].type != OpType::send || p.ops[i].priority == priorities[i]) continue;
    p.ops[i].priority = priorities[i];
    ++changed;
  }
  return changed;
}

}  // namespace tw

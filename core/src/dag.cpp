#include "tensorwire/core/dag.hpp"

#include <algorithm>
#include <limits>

namespace tw {

std::vector<std::vector<OpIndex>> same_iteration_predecessors(const Profile& profile) {
  std::vector<std::vector<OpIndex>> preds(profile.ops.size());
  for (std::size_t i = 0; i < profile.ops.size(); ++i) {
    for (const auto& d : profile.ops[i].after) {
      if (d.iterations_back == 0) preds[i].push_back(d.op);
    }
  }
  return preds;
}

std::vector<OpIndex> topological_order(std::span<const std::vector<OpIndex>> preds) {
  const std::size_t n = preds.size();
  std::vector<std::uint32_t> indegree(n, 0);
  std::vector<std::vector<OpIndex>> succs(n);
  for (std::size_t v = 0; v < n; ++v) {
    for (OpIndex u : preds[v]) {
      succs[u].push_back(static_cast<OpIndex>(v));
      ++indegree[v];
    }
  }
  std::vector<OpIndex> order;
  order.reserve(n);
  for (std::size_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) order.push_back(static_cast<OpIndex>(v));
  }
  for (std::size_t head = 0; head < order.size(); ++head) {
    for (OpIndex s : succs[order[head]]) {
      if (--indegree[s] == 0) order.push_back(s);
    }
  }
  if (order.size() != n) order.clear();
  return order;
}

std::vector<std::vector<OpIndex>> find_cycles(std::span<const std::vector<OpIndex>> preds) {
  // Tarjan's SCC algorithm on the predecessor graph, with an explicit stack.
  const std::size_t n = preds.size();
  constexpr std::uint32_t kUnvisited = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> index(n, kUnvisited), low(n, 0), component(n, kUnvisited);
  std::vector<bool> on_stack(n, false);
  std::vector<OpIndex> stack;
  struct Frame {
    OpIndex v;
    std::size_t next;
  };
  std::vector<Frame> call;
  std::uint32_t counter = 0;
  std::uint32_t components = 0;
  std::vector<std::vector<OpIndex>> sccs;

  for (std::size_t root = 0; root < n; ++root) {
    if (index[root] != kUnvisited) continue;
    call.push_back({static_cast<OpIndex>(root), 0});
    index[root] = low[root] = counter++;
    stack.push_back(static_cast<OpIndex>(root));
    on_stack[root] = true;
    while (!call.empty()) {
      Frame& f = call.back();
      if (f.next < preds[f.v].size()) {
        const OpIndex w = preds[f.v][f.next++];
        if (index[w] == kUnvisited) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = true;
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[f.v] = std::min(low[f.v], index[w]);
        }
        continue;
      }
      const OpIndex v = f.v;
      call.pop_back();
      if (!call.empty()) low[call.back().v] = std::min(low[call.back().v], low[v]);
      if (low[v] == index[v]) {
        std::vector<OpIndex> scc;
        OpIndex w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          component[w] = components;
          scc.push_back(w);
        } while (w != v);
        ++components;
        const bool self_loop = std::find(preds[v].begin(), preds[v].end(), v) != preds[v].end();
        if (scc.size() > 1 || self_loop) sccs.push_back(std::move(scc));
      }
    }
  }

  // Within each component, walk from its smallest op along predecessors that stay in
  // the component, breadth first, until we are back: a shortest cycle through it.
  std::vector<std::vector<OpIndex>> cycles;
  std::vector<OpIndex> parent(n, 0);
  std::vector<bool> seen(n, false);
  for (auto& scc : sccs) {
    const OpIndex start = *std::min_element(scc.begin(), scc.end());
    const std::uint32_t comp = component[start];
    std::vector<OpIndex> frontier{start};
    std::vector<OpIndex> touched{start};
    seen[start] = true;
    bool closed = false;
    OpIndex last = start;
    for (std::size_t head = 0; head < frontier.size() && !closed; ++head) {
      const OpIndex v = frontier[head];
      for (OpIndex w : preds[v]) {
        if (component[w] != comp) continue;
        if (w == start) {
          last = v;
          closed = true;
          break;
        }
        if (!seen[w]) {
          seen[w] = true;
          parent[w] = v;
          touched.push_back(w);
          frontier.push_back(w);
        }
      }
    }
    // Following parents back from the op that waits for `start` lists the cycle in
    // execution order: start -> last -> ... -> start.
    std::vector<OpIndex> path{start};
    for (OpIndex v = last; v != start; v = parent[v]) path.push_back(v);
    path.push_back(start);
    for (OpIndex v : touched) seen[v] = false;
    cycles.push_back(std::move(path));
  }
  std::sort(cycles.begin(), cycles.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return cycles;
}

}  // namespace tw

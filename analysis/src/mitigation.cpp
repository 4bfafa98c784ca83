#include "tensorwire/analysis/mitigation.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensorwire/analysis/graph_sim.hpp"
#include "tensorwire/analysis/priority.hpp"

namespace tw {
namespace {

std::string place(const DiagnosisInput& in, RankId r) {
  return r < in.hosts.size() && !in.hosts[r].empty() ? in.hosts[r] : "rank " + std::to_string(r);
}

bool is_pair(const std::string& a, const std::string& b, const SlowLink& l) { return (a == l.a && b == l.b) || (a == l.b && b == l.a); }

FlowModel model_of(const FlowFit& f) {
  FlowModel m;
  m.bps = f.bps > 0 ? f.bps : 10e9;
  m.per_message = f.per_message;
  m.latency = f.latency;
  m.path_bps = f.path_bps;
  return m;
}

// The mean iteration of `p` with every compute op at its measured median and
// every flow at the model of its host pair: the slow one's where it crosses the
// slow pair, the others' median elsewhere.
Nanos simulate_on_hosts(const Profile& p, const DiagnosisInput& in, const Diagnosis& d, const SlowLink& slow,
                        const std::vector<Nanos>& compute) {
  FlowModel fast, bad;
  {
    std::vector<double> bps, path;
    std::vector<Nanos> pm, lat;
    for (FlowIndex f = 0; f < d.flows.size(); ++f) {
      if (std::find(slow.flows.begin(), slow.flows.end(), f) != slow.flows.end()) continue;
      bps.push_back(d.flows[f].bps), pm.push_back(d.flows[f].per_message), lat.push_back(d.flows[f].latency);
      path.push_back(d.flows[f].path_bps);
    }
    const auto med = [](auto v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? typename decltype(v)::value_type{} : v[v.size() / 2];
    };
    fast.bps = bps.empty() ? 10e9 : med(bps);
    fast.per_message = med(pm), fast.latency = med(lat), fast.path_bps = med(path);
    bad = model_of(d.flows[slow.flows.front()]);
  }
  SimGraph g = sim_graph(p, fast);
  for (FlowIndex f = 0; f < p.flows.size(); ++f) {
    g.flows[f] = is_pair(place(in, p.flows[f].src), place(in, p.flows[f].dst), slow) ? bad : fast;
  }
  for (OpIndex o = 0; o < p.ops.size(); ++o) {
    if (p.ops[o].type == OpType::compute && compute[o] >= 0) g.set_durations(o, {compute[o]});
  }
  g.iterations = std::min<std::uint64_t>(std::max<std::uint64_t>(p.iterations, 2), 8);
  const GraphSimRun r = simulate_graph(g);
  return static_cast<Nanos>(std::llround(r.mean_iteration(1)));
}

}  // namespace

std::vector<RankId> ring_next(const Profile& p) {
  const std::size_t n = p.ranks.size();
  if (n < 3) return {};
  std::vector<RankId> next(n, static_cast<RankId>(n));
  for (const Flow& f : p.flows) {
    if (next[f.src] != n && next[f.src] != f.dst) return {};  // more than one peer: not a ring
    next[f.src] = f.dst;
  }
  std::vector<bool> seen(n, false);
  RankId r = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (next[r] == n || seen[r]) return {};
    seen[r] = true;
    r = next[r];
  }
  return r == 0 ? next : std::vector<RankId>{};
}

Profile renamed_ranks(const Profile& p, const std::vector<RankId>& perm) {
  Profile q = p;
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    q.ranks[perm[r]] = p.ranks[r];
    q.ranks[perm[r]].id = perm[r];
  }
  for (Flow& f : q.flows) f.src = perm[f.src], f.dst = perm[f.dst];
  for (Op& o : q.ops) o.rank = perm[o.rank];
  if (q.observed) {
    for (ObservedIteration& it : q.observed->iterations) {
      if (it.rank_durations.size() != p.ranks.size()) continue;
      std::vector<Nanos> v(it.rank_durations.size());
      for (std::size_t r = 0; r < v.size(); ++r) v[perm[r]] = it.rank_durations[r];
      it.rank_durations = std::move(v);
    }
  }
  q.index();
  return q;
}

std::optional<Mitigation> mitigate(const DiagnosisInput& in, const Diagnosis& d, const DiagnosisOptions& o, std::string& why) {
  const Profile& p = in.profile;
  // Measured median compute per op, for the predictions.
  std::vector<Nanos> compute(p.ops.size(), -1);
  for (OpIndex op = 0; op < p.ops.size() && op < in.measured.ops.size(); ++op) {
    if (p.ops[op].type != OpType::compute) continue;
    std::vector<Nanos> v;
    for (const Instance& x : in.measured.ops[op]) {
      if (x.start >= 0 && x.end >= x.start) v.push_back(x.end - x.start);
    }
    if (!v.empty()) compute[op] = percentile(std::move(v), 0.5);
  }
  const SlowLink* slow = nullptr;
  for (const SlowLink& l : d.links) {
    if (l.named && !l.flows.empty()) {
      slow = &l;
      break;
    }
  }
  const std::vector<RankId> next = ring_next(p);
  if (slow && !next.empty()) {
    // Try every swap of two hosts' ranks; keep the one that predicts most.
    const std::size_t n = p.ranks.size();
    std::optional<Mitigation> best;
    const Nanos before = simulate_on_hosts(p, in, d, *slow, compute);
    // Only swaps that move a rank off one of the slow pair's hosts can help:
    // about 2n simulations, not n^2 / 2.
    for (RankId x = 0; x < n; ++x) {
      const std::string hx = place(in, x);
      if (hx != slow->a && hx != slow->b) continue;
      for (RankId y = 0; y < n; ++y) {
        if (y == x) continue;
        std::vector<RankId> perm(n);
        std::iota(perm.begin(), perm.end(), 0);
        std::swap(perm[x], perm[y]);
        bool crosses = false;
        for (RankId r = 0; r < n && !crosses; ++r) crosses = is_pair(place(in, perm[r]), place(in, perm[next[r]]), *slow);
        if (crosses) continue;
        Profile q = renamed_ranks(p, perm);
        const Nanos after = simulate_on_hosts(q, in, d, *slow, compute);
        if (after >= before || (best && after >= best->after)) continue;  // only what the simulator says is faster
        Mitigation m;
        m.kind = "reorder";
        m.perm = perm;
        m.before = before;
        m.after = after;
        m.predicted = before - after;
        m.description = "the ring with ranks " + std::to_string(x) + " and " + std::to_string(y) + " swapped, so that no neighbours sit on " +
                        slow->a + " - " + slow->b;
        q.metadata.description = (p.metadata.description.empty() ? "" : p.metadata.description + "; ") + "mitigated: " + m.description;
        q.metadata.generator.clear();  // it no longer makes this profile
        m.profile = std::move(q);
        best = std::move(m);
      }
    }
    if (best) return best;
    why = "no ring order that keeps " + slow->a + " - " + slow->b + " apart simulates faster";
  }
  // The send order, when it saves more than compressing (it costs nothing and loses nothing).
  const std::size_t key = o.compress_factors.size() > 1 ? 1 : 0;
  const Nanos compress_saving = d.compression.empty() || d.compression[0].saving.size() <= key ? 0 : d.compression[0].saving[key];
  const Nanos order_saving = d.order.tried && d.order.changed > 0 ? d.order.before - d.order.after : 0;
  if (order_saving > 0 && order_saving >= compress_saving) {
    Mitigation m;
    m.kind = "priority";
    m.predicted = order_saving;
    m.before = d.order.before;
    m.after = d.order.after;
    Profile q = p;
    const std::size_t changed = prioritize_sends(q, d.order.priorities);
    m.description = "sends by urgency, critical path first (" + std::to_string(changed) + " sends given a priority)";
    q.metadata.description = (p.metadata.description.empty() ? "" : p.metadata.description + "; ") + "mitigated: " + m.description;
    q.metadata.generator.clear();  // it no longer makes this profile
    q.index();
    m.profile = std::move(q);
    return m;
  }
  // Compression of the tensor that saves most at 4x (or the ranking's middle factor).
  if (compress_saving <= 0) {
    if (why.empty()) why = "no named slow link in a ring, no send order and no tensor whose compression saves time";
    return std::nullopt;
  }
  const Compression& c = d.compression[0];
  const double k = o.compress_factors[key];
  Mitigation m;
  m.kind = "compress";
  m.predicted = c.saving[key];
  m.before = d.simulated;
  m.after = d.simulated - c.saving[key];
  Profile q = p;
  const std::size_t changed = compress_sends(q, c.tensor, k, o.compress_ns_per_byte);
  m.description = c.tensor + " compressed " + std::to_string(static_cast<int>(k)) + "x (" + std::to_string(changed) +
                  " messages; each send's gap longer by the compression cost)";
  q.metadata.description = (p.metadata.description.empty() ? "" : p.metadata.description + "; ") + "mitigated: " + m.description;
  q.metadata.generator.clear();  // it no longer makes this profile
  q.index();
  m.profile = std::move(q);
  return m;
}

std::size_t compress_sends(Profile& profile, const std::string& tensor, double k, double cost_ns_per_byte) {
  std::size_t changed = 0;
  for (Op& op : profile.ops) {
    if (op.type != OpType::send || (op.tensor.empty() ? op.id : op.tensor) != tensor) continue;
    const auto cost = static_cast<Nanos>(std::llround(cost_ns_per_byte * static_cast<double>(op.bytes)));
    op.bytes = std::max<Bytes>(1, static_cast<Bytes>(std::ceil(static_cast<double>(op.bytes) / k)));
    op.gap += cost;
    for (Nanos& g : op.gaps) g += cost;
    ++changed;
  }
  return changed;
}

}  // namespace tw

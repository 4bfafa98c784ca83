#include "tensorwire/core/profile_stats.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

#include "tensorwire/core/dag.hpp"

namespace tw {

Nanos message_time(const Profile& p, const RankLinks& links, const Op& send) {
  const Flow& f = p.flows[send.flow];
  return transfer_time(send.bytes, std::min(links[f.src].egress_bps, links[f.dst].ingress_bps));
}

ProfileStats compute_stats(const Profile& p) {
  ProfileStats s;
  s.ranks.assign(p.ranks.size(), RankStats{});
  s.flows.assign(p.flows.size(), FlowStats{});
  std::unordered_set<std::string_view> labels;
  for (const Op& op : p.ops) {
    if (op.type == OpType::compute) {
      ++s.compute_ops;
      s.ranks[op.rank].compute += op.mean_duration();
      ++s.ranks[op.rank].compute_ops;
      continue;
    }
    ++s.send_ops;
    const Flow& f = p.flows[op.flow];
    s.ranks[f.src].sent += op.bytes;
    ++s.ranks[f.src].send_ops;
    s.ranks[f.dst].received += op.bytes;
    s.flows[op.flow].bytes += op.bytes;
    ++s.flows[op.flow].messages;
    s.bytes_per_iteration += op.bytes;
    if (s.smallest_message == 0 || op.bytes < s.smallest_message) s.smallest_message = op.bytes;
    if (op.bytes > s.largest_message) s.largest_message = op.bytes;
    if (!op.tensor.empty()) labels.insert(op.tensor);
  }
  s.tensors = p.tensors.empty() ? labels.size() : p.tensors.size();
  return s;
}

Nanos transfer_time(Bytes bytes, double link_bps) {
  if (bytes == 0) return 0;
  return static_cast<Nanos>(std::ceil(static_cast<double>(bytes) * 8.0 * 1e9 / link_bps));
}

RankLinks uniform_links(std::size_t ranks, double bps) { return RankLinks(ranks, RankLink{bps, bps}); }

LowerBound lower_bound(const Profile& p, const ProfileStats& s, double link_bps) {
  LowerBound b = lower_bound(p, s, uniform_links(p.ranks.size(), link_bps));
  b.link_bps = link_bps;
  return b;
}

namespace {

void check_links(const Profile& p, const ProfileStats& s, const RankLinks& links) {
  if (links.size() != p.ranks.size() || s.ranks.size() != p.ranks.size()) {
    throw std::invalid_argument("lower bound: " + std::to_string(links.size()) + " links for " + std::to_string(p.ranks.size()) + " ranks");
  }
  for (std::size_t r = 0; r < links.size(); ++r) {
    if ((s.ranks[r].sent > 0 && !(links[r].egress_bps > 0)) || (s.ranks[r].received > 0 && !(links[r].ingress_bps > 0))) {
      throw std::invalid_argument("lower bound: rank " + std::to_string(r) + " moves bytes but has no link rate");
    }
  }
}

}  // namespace

LowerBound lower_bound(const Profile& p, const ProfileStats& s, const RankLinks& links) { return lower_bound(p, s, links, links); }

LowerBound lower_bound(const Profile& p, const ProfileStats& s, const RankLinks& totals, const RankLinks& messages) {
  check_links(p, s, totals);
  check_links(p, s, messages);
  const RankLinks& links = messages;
  LowerBound b;
  b.link_bps = totals.empty() ? 0 : totals[0].egress_bps;
  for (const RankLinks* set : {&totals, &messages}) {
    for (const RankLink& l : *set) {
      if (l.egress_bps != b.link_bps || l.ingress_bps != b.link_bps) b.link_bps = 0;
    }
  }
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto rank = static_cast<RankId>(r);
    if (s.ranks[r].compute > b.max_compute) b.max_compute = s.ranks[r].compute, b.compute_rank = rank;
    const Nanos out = transfer_time(s.ranks[r].sent, totals[r].egress_bps);
    const Nanos in = transfer_time(s.ranks[r].received, totals[r].ingress_bps);
    if (out > b.max_egress) b.max_egress = out, b.egress_rank = rank;
    if (in > b.max_ingress) b.max_ingress = in, b.ingress_rank = rank;
  }

  const auto preds = same_iteration_predecessors(p);
  const auto order = topological_order(preds);
  std::vector<Nanos> finish(p.ops.size(), 0);
  std::vector<OpIndex> via(p.ops.size(), 0);
  std::vector<bool> has_via(p.ops.size(), false);
  OpIndex last = 0;
  for (OpIndex v : order) {
    Nanos start = 0;
    for (OpIndex u : preds[v]) {
      if (!has_via[v] || finish[u] > start) {
        start = finish[u];
        via[v] = u;
        has_via[v] = true;
      }
    }
    const Op& op = p.ops[v];
    finish[v] = start + op.mean_gap() + (op.type == OpType::compute ? op.mean_duration() : message_time(p, links, op));
    if (finish[v] > b.critical_path) {
      b.critical_path = finish[v];
      last = v;
    }
  }
  if (!order.empty()) {
    for (OpIndex v = last;; v = via[v]) {
      b.critical_ops.push_back(v);
      if (!has_via[v]) break;
    }
    std::reverse(b.critical_ops.begin(), b.critical_ops.end());
  }

  b.iteration = b.critical_path;
  b.limited_by = "critical path";
  const auto consider = [&](Nanos v, std::string why) {
    if (v > b.iteration) {
      b.iteration = v;
      b.limited_by = std::move(why);
    }
  };
  consider(b.max_compute, "compute on rank " + std::to_string(b.compute_rank));
  consider(b.max_egress, "egress of rank " + std::to_string(b.egress_rank));
  consider(b.max_ingress, "ingress of rank " + std::to_string(b.ingress_rank));

  const auto iters = static_cast<Nanos>(p.iterations);
  if (p.iteration_barrier) {
    b.run = b.iteration * iters;
  } else {
    const Nanos resource = std::max({b.max_compute, b.max_egress, b.max_ingress});
    b.run = std::max(resource * iters, b.critical_path);
  }
  return b;
}

nlohmann::json stats_json(const Profile& p, const ProfileStats& s, const LowerBound& b) {
  using nlohmann::json;
  json j;
  j["version"] = p.version;
  j["metadata"] = {{"source", p.metadata.source},   {"framework", p.metadata.framework},
                   {"pattern", p.metadata.pattern}, {"model", p.metadata.model}};
  j["ranks"] = p.ranks.size();
  j["flows"] = p.flows.size();
  j["iterations"] = p.iterations;
  j["iteration_barrier"] = p.iteration_barrier;
  j["ops_per_iteration"] = {{"total", p.ops.size()}, {"compute", s.compute_ops}, {"send", s.send_ops}};
  j["tensors"] = s.tensors;
  j["bytes_per_iteration"] = s.bytes_per_iteration;
  j["message_bytes"] = {{"min", s.smallest_message}, {"max", s.largest_message}};
  json ranks = json::array();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& x = s.ranks[r];
    ranks.push_back({{"rank", r},
                     {"host", p.ranks[r].host},
                     {"role", role_name(p.ranks[r].role)},
                     {"sent_bytes", x.sent},
                     {"received_bytes", x.received},
                     {"compute_ns", x.compute},
                     {"compute_ops", x.compute_ops},
                     {"send_ops", x.send_ops}});
  }
  j["per_rank"] = std::move(ranks);
  json flows = json::array();
  for (std::size_t f = 0; f < s.flows.size(); ++f) {
    flows.push_back({{"id", p.flows[f].id},
                     {"src", p.flows[f].src},
                     {"dst", p.flows[f].dst},
                     {"bytes", s.flows[f].bytes},
                     {"messages", s.flows[f].messages},
                     {"read_lag_ns", p.flows[f].read_lag}});
  }
  j["per_flow"] = std::move(flows);
  json crit = json::array();
  for (OpIndex v : b.critical_ops) crit.push_back(p.ops[v].id);
  j["lower_bound"] = {{"link_bps", b.link_bps},
                      {"iteration_ns", b.iteration},
                      {"run_ns", b.run},
                      {"limited_by", b.limited_by},
                      {"critical_path_ns", b.critical_path},
                      {"max_compute_ns", b.max_compute},
                      {"max_egress_ns", b.max_egress},
                      {"max_ingress_ns", b.max_ingress},
                      {"critical_path", std::move(crit)}};
  return j;
}

}  // namespace tw

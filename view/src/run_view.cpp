// The view of a run directory (or of a built profile's observed timings): a
// process per rank, with its iterations, its compute ops, and per flow the
// messages it sent, with their stages from the kernel's transmit timestamps, and
// those it read; a flow from each send to its receipt and from each dependency
// to the op that waited for it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "draw.hpp"
#include "tensorwire/analysis/sources.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/view/sources.hpp"

namespace tw::view {
namespace {

// One op instance as drawn: its times and where its slices went.
struct Drawn {
  Nanos start = -1, end = -1;   // send: ready and sent (or arrival, for profiles); compute: start and end
  draw::MessageTimes msg;       // sends of runs
  Nanos read_first = -1, read_last = -1;
  std::int64_t planned = -1;
  SliceRef slice{~0u, 0}, read{~0u, 0};
  bool has() const { return slice.track != ~0u; }
  bool has_read() const { return read.track != ~0u; }
};

struct Key {
  std::uint32_t op, iteration;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const { return (static_cast<std::size_t>(k.op) << 32) ^ k.iteration; }
};

bool wanted_rank(const Selection& s, RankId r) { return s.ranks.empty() || std::find(s.ranks.begin(), s.ranks.end(), r) != s.ranks.end(); }
bool wanted_flow(const Selection& s, const Flow& f) {
  return s.flows.empty() || std::find(s.flows.begin(), s.flows.end(), std::make_pair(f.src, f.dst)) != s.flows.end();
}
bool wanted_iteration(const Selection& s, std::uint32_t it) {
  return !s.iterations || (static_cast<std::int64_t>(it) >= s.iterations->first && static_cast<std::int64_t>(it) < s.iterations->second);
}
bool wanted_op(const Selection& s, const Profile& p, const Op& op) {
  if (op.type == OpType::send) return wanted_rank(s, p.flows[op.flow].src) && wanted_flow(s, p.flows[op.flow]);
  return wanted_rank(s, op.rank) && s.flows.empty();
}

// Draws what `ops` holds (per op instance) and the dependency flows between them.
View draw_schedule(const Profile& p, std::unordered_map<Key, Drawn, KeyHash>& ops, const std::vector<std::vector<std::pair<Nanos, Nanos>>>& iters,
                   const std::vector<std::string>& hosts, const std::vector<std::vector<std::pair<Nanos, double>>>& cwnd,
                   const Selection& sel, ViewCounts& n) {
  for (RankId r : sel.ranks) {
    if (r >= p.ranks.size()) throw std::invalid_argument("--ranks: rank " + std::to_string(r) + ": the job has " + std::to_string(p.ranks.size()) + " ranks");
  }
  for (const auto& [a, b] : sel.flows) {
    if (a >= p.ranks.size() || b >= p.ranks.size()) {
      throw std::invalid_argument("--flows: " + std::to_string(a) + "-" + std::to_string(b) + ": the job has " + std::to_string(p.ranks.size()) + " ranks");
    }
  }
  View v;
  std::vector<std::uint64_t> proc(p.ranks.size(), 0);
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    if (!wanted_rank(sel, static_cast<RankId>(r))) continue;
    const std::string host = r < hosts.size() && !hosts[r].empty() ? hosts[r] : p.ranks[r].host;
    proc[r] = v.add_process(static_cast<int>(r) + 1, "rank " + std::to_string(r) + (host.empty() ? "" : " (" + host + ")") +
                                                     (p.ranks[r].role == Role::server ? " server" : ""));
  }
  const StrId cat_iteration = v.intern("iteration"), cat_compute = v.intern("compute"), cat_message = v.intern("message"),
              cat_read = v.intern("read");
  Nanos lo = std::numeric_limits<Nanos>::max(), hi = std::numeric_limits<Nanos>::min();
  for (const auto& [k, d] : ops) {
    if (d.start >= 0) lo = std::min(lo, d.start), hi = std::max({hi, d.end, d.msg.end(), d.read_last});
  }
  if (lo > hi) lo = hi = 0;
  const Nanos bin = draw::bin_for(hi - lo, sel.counter_points);
  std::set<std::size_t> shown;  // iteration numbers drawn, on any rank
  for (std::size_t r = 0; r < iters.size() && r < proc.size(); ++r) {
    if (!proc[r] || iters[r].empty()) continue;
    const std::uint32_t t = v.add_track(proc[r], "iterations", TrackKind::slices);
    Nanos last = std::numeric_limits<Nanos>::min();
    for (std::size_t i = 0; i < iters[r].size(); ++i) {
      const auto [b0, e0] = iters[r][i];
      if (b0 < 0 || e0 < b0 || !wanted_iteration(sel, static_cast<std::uint32_t>(i))) continue;
      const Nanos b = std::max(b0, last), e = std::max(e0, b);
      const SliceRef s = v.add_slice(t, b, e, v.intern("iteration " + std::to_string(i)), 0, cat_iteration);
      v.add_arg(s, "iteration", static_cast<std::int64_t>(i));
      last = e;
      shown.insert(i);
    }
  }
  n.iterations = shown.size();
  // Op instances in time order, each to its rank's compute lanes or its flow's.
  std::vector<std::pair<Key, Drawn*>> order;
  for (auto& [k, d] : ops) {
    if (d.start >= 0 && d.end >= d.start) order.emplace_back(k, &d);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->start, a.first.op, a.first.iteration) < std::tie(b.second->start, b.first.op, b.first.iteration);
  });
  std::vector<std::optional<Lanes>> compute(p.ranks.size()), sends(p.flows.size()), reads(p.flows.size());
  const auto lanes = [&](std::optional<Lanes>& l, std::uint64_t process, const std::string& name) -> Lanes& {
    if (!l) {
      const std::uint32_t g = v.add_track(process, name, TrackKind::group);
      l.emplace(v, v.tracks[g].uuid, name);
    }
    return *l;
  };
  std::vector<std::vector<draw::Transfer>> moved(p.flows.size());
  for (auto& [k, d] : order) {
    const Op& op = p.ops[k.op];
    if (op.type == OpType::compute) {
      Lanes& l = lanes(compute[op.rank], proc[op.rank], "compute");
      d->slice = v.add_slice(l.place(d->start, d->end), d->start, d->end, v.intern(op.label.empty() ? op.id : op.label), 0, cat_compute);
      v.add_arg(d->slice, "iteration", k.iteration);
      if (d->planned >= 0) v.add_arg(d->slice, "late by ns", d->start - d->planned);
      ++n.compute;
      continue;
    }
    const Flow& f = p.flows[op.flow];
    Lanes& l = lanes(sends[op.flow], proc[f.src], "to rank " + std::to_string(f.dst) + " · " + f.id);
    draw::MessageTimes t = d->msg;
    if (t.ready < 0) t = {d->start, d->end, -1, -1, -1};
    d->slice = draw::message(v, l, t, v.intern(op.tensor.empty() ? op.id : op.tensor + " · " + op.id), cat_message);
    v.add_arg(d->slice, "op", op.id);
    v.add_arg(d->slice, "bytes", static_cast<std::int64_t>(op.bytes));
    v.add_arg(d->slice, "iteration", k.iteration);
    if (d->planned >= 0) v.add_arg(d->slice, "late by ns", d->start - d->planned);
    ++n.messages;
    const bool wire = t.wire_first >= 0 && t.wire_last >= t.wire_first;
    moved[op.flow].push_back({wire ? t.wire_first : t.ready, wire ? t.wire_last : std::max(t.sent, d->read_last), op.bytes});
  }
  // Receipts, in time order per flow.
  std::vector<std::pair<Key, Drawn*>> received;
  for (auto& [k, d] : order) {
    if (p.ops[k.op].type == OpType::send && d->read_first >= 0 && d->read_last >= d->read_first) received.emplace_back(k, d);
  }
  std::sort(received.begin(), received.end(), [](const auto& a, const auto& b) { return a.second->read_first < b.second->read_first; });
  for (auto& [k, d] : received) {
    const Flow& f = p.flows[p.ops[k.op].flow];
    if (!proc[f.dst]) continue;
    Lanes& l = lanes(reads[p.ops[k.op].flow], proc[f.dst], "from rank " + std::to_string(f.src) + " · " + f.id);
    d->read = v.add_slice(l.place(d->read_first, d->read_last), d->read_first, d->read_last, v.intern("read " + p.ops[k.op].id), 0, cat_read);
    v.add_arg(d->read, "bytes", static_cast<std::int64_t>(p.ops[k.op].bytes));
    if (d->has()) v.link(d->slice, d->read);
    ++n.receipts;
  }
  // Dependencies: from what an op waited for to the op.
  for (auto& [k, d] : order) {
    if (!d->has()) continue;
    for (const Dependency& dep : p.ops[k.op].after) {
      if (dep.iterations_back > k.iteration) continue;
      const auto it = ops.find({dep.op, k.iteration - dep.iterations_back});
      if (it == ops.end()) continue;
      const Drawn& from = it->second;
      // A receipt not drawn (a profile's, or its receiver not shown): the send, which ends on arrival.
      if (dep.recv && from.has_read()) {
        n.dependencies += v.link(from.read, d->slice);
      } else if (from.has()) {
        n.dependencies += v.link(from.slice, d->slice);
      }
    }
  }
  for (std::size_t f = 0; f < p.flows.size(); ++f) {
    const std::uint64_t src = proc[p.flows[f].src];
    if (!src || !wanted_flow(sel, p.flows[f])) continue;
    const std::string name = "to rank " + std::to_string(p.flows[f].dst) + " · " + p.flows[f].id;
    draw::counter(v, src, "throughput " + name + " (bit/s)", "bit/s", downsample(draw::throughput(std::move(moved[f]), bin), bin, true));
    if (f < cwnd.size()) {
      std::vector<std::pair<Nanos, double>> c;
      for (const auto& x : cwnd[f]) {
        if (!sel.iterations || (x.first >= lo && x.first <= hi)) c.push_back(x);
      }
      draw::counter(v, src, "cwnd " + name + " (segments)", "segments", downsample(std::move(c), bin, true));
    }
  }
  return v;
}

// When the run was: from its ranks' summaries (start_ns, end_ns), a minute
// either side; nullopt when they do not say.

}  // namespace

View view_of_run(const std::string& dir, const Selection& sel, ViewCounts* counts) {
  const Profile p = load_run_profile(dir);
  // A failed run: what the surviving ranks measured (a rank whose agent died
  // before its upload has an empty track).
  const std::vector<std::vector<Record>> ranks = load_kept_run_records(dir, p).ranks;
  // (load_records refused records with times far outside the run: they would
  // stretch the timeline over years and thin every counter to nothing.)
  std::unordered_map<Key, Drawn, KeyHash> ops;
  std::vector<std::vector<std::pair<Nanos, Nanos>>> iters(p.ranks.size());
  std::vector<std::vector<std::pair<Nanos, double>>> cwnd(p.flows.size());
  const auto op_ok = [&](std::uint32_t op, std::uint32_t it) {
    return op < p.ops.size() && wanted_iteration(sel, it) && wanted_op(sel, p, p.ops[op]);
  };
  for (const auto& recs : ranks) {
    for (const Record& rec : recs) {
      switch (rec.kind()) {
        case RecordKind::send: {
          const auto x = rec.as<SendRecord>();
          if (!op_ok(x.op, x.iteration)) break;
          Drawn& d = ops[{x.op, x.iteration}];
          d.start = x.ready, d.end = std::max(x.sent_app, x.ready), d.planned = x.planned;
          d.msg.ready = x.ready, d.msg.sent = x.sent_app;
          break;
        }
        case RecordKind::tx_timestamps: {
          const auto x = rec.as<TxTimestampsRecord>();
          if (!op_ok(x.op, x.iteration)) break;
          Drawn& d = ops[{x.op, x.iteration}];
          d.msg.wire_first = x.wire_first, d.msg.wire_last = x.wire_last, d.msg.acked = x.acked;
          break;
        }
        case RecordKind::receive: {
          const auto x = rec.as<ReceiveRecord>();
          if (!op_ok(x.op, x.iteration)) break;
          Drawn& d = ops[{x.op, x.iteration}];
          d.read_first = x.recv_first, d.read_last = x.recv_last;
          break;
        }
        case RecordKind::compute: {
          const auto x = rec.as<ComputeRecord>();
          if (!op_ok(x.op, x.iteration)) break;
          Drawn& d = ops[{x.op, x.iteration}];
          d.start = x.start, d.end = x.end, d.planned = x.planned;
          break;
        }
        case RecordKind::iteration: {
          const auto x = rec.as<IterationRecord>();
          if (x.rank >= iters.size() || x.iteration > p.iterations + 1'000'000) break;
          auto& v = iters[x.rank];
          if (v.size() <= x.iteration) v.resize(x.iteration + 1, {-1, -1});
          v[x.iteration] = {x.start, x.end};
          break;
        }
        case RecordKind::tcp_info: {
          const auto x = rec.as<TcpInfoRecord>();
          if (x.flow < cwnd.size() && x.at >= 0) cwnd[x.flow].emplace_back(x.at, x.snd_cwnd);
          break;
        }
      }
    }
  }
  // A send's stages only when its transmit timestamps came in order.
  for (auto& [k, d] : ops) {
    if (d.msg.wire_first >= 0 && d.msg.wire_first < d.msg.ready) d.msg.wire_first = d.msg.ready;
  }
  // Hosts and clock bounds from the ranks' summaries.
  std::vector<std::string> hosts(p.ranks.size());
  nlohmann::json clocks = nlohmann::json::array();
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    if (!std::filesystem::exists(run_dir::summary_file(dir, static_cast<RankId>(r)))) continue;
    const nlohmann::json j = run_dir::read_summary(dir, static_cast<RankId>(r));
    if (j.contains("host") && j["host"].is_string()) hosts[r] = j["host"].get<std::string>();
    if (j.contains("clock") && j["clock"].is_object()) {
      const nlohmann::json& c = j["clock"];
      clocks.push_back({{"rank", r}, {"host", hosts[r]}, {"offset_ns", c.value("offset_ns", Nanos{0})}, {"bound_ns", c.value("bound_ns", Nanos{-1})},
                        {"onto", c.value("merged_onto", "")}});
    }
  }
  ViewCounts n;
  View v = draw_schedule(p, ops, iters, hosts, cwnd, sel, n);
  v.metadata = {{"source", "run " + dir},
                {"clock", "CLOCK_REALTIME of the controller's host: each agent's times less its clock offset"},
                {"hosts", clocks},
                {"messages", n.messages},
                {"receipts", n.receipts},
                {"compute", n.compute},
                {"dependencies", n.dependencies}};
  if (counts) *counts = n;
  return v;
}

View view_of_profile(const Profile& p, const std::string& path, const Selection& sel, ViewCounts* counts) {
  if (!p.observed || p.observed->ops.empty()) {
    throw std::runtime_error(path + ": no observed timings to draw (a built profile has them; view the capture or a run of a synthetic one)");
  }
  const Observed& o = *p.observed;
  std::size_t n_it = o.iterations.size();
  for (const ObservedOp& x : o.ops) n_it = std::max<std::size_t>(n_it, x.iteration + std::size_t{1});
  // Iterations laid end to end from 0.
  std::vector<Nanos> at(n_it + 1, 0);
  for (std::size_t i = 0; i < n_it; ++i) at[i + 1] = at[i] + (i < o.iterations.size() ? std::max<Nanos>(0, o.iterations[i].duration) : 0);
  std::unordered_map<Key, Drawn, KeyHash> ops;
  for (const ObservedOp& x : o.ops) {
    if (x.op >= p.ops.size() || !wanted_iteration(sel, x.iteration) || !wanted_op(sel, p, p.ops[x.op])) continue;
    Drawn& d = ops[{x.op, x.iteration}];
    d.start = at[x.iteration] + x.start;
    d.end = at[x.iteration] + std::max(x.end, x.start);
  }
  std::vector<std::vector<std::pair<Nanos, Nanos>>> iters(p.ranks.size());
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    for (std::size_t i = 0; i < o.iterations.size(); ++i) {
      const auto& rd = o.iterations[i].rank_durations;
      iters[r].emplace_back(at[i], at[i] + (r < rd.size() ? rd[r] : o.iterations[i].duration));
    }
  }
  ViewCounts n;
  View v = draw_schedule(p, ops, iters, {}, {}, sel, n);
  v.metadata = {{"source", "profile " + path},
                {"clock", "the profile's observed timings: iterations laid end to end from time 0"},
                {"messages", n.messages},
                {"compute", n.compute},
                {"dependencies", n.dependencies}};
  if (counts) *counts = n;
  return v;
}

}  // namespace tw::view

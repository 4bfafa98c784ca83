#include "tensorwire/analysis/diagnosis.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "tensorwire/analysis/priority.hpp"
#include "tensorwire/util/parallel.hpp"

namespace tw {
namespace {

Nanos median_of(std::vector<Nanos> v) { return v.empty() ? 0 : percentile(std::move(v), 0.5); }

double median_double(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// For each value, the median of all the others, by median_of's rule (Nanos) or
// median_double's (double): one sort, not one per value (a job of 8192 ranks).
// The others' k-th smallest is the sorted k-th, or the next one from the
// value's own place on.
template <typename T>
std::vector<T> medians_of_others(const std::vector<T>& v) {
  std::vector<T> out(v.size(), T{0});
  if (v.size() < 2) return out;
  std::vector<T> sorted(v);
  std::sort(sorted.begin(), sorted.end());
  const std::size_t m = v.size() - 1;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto pos = static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), v[i]) - sorted.begin());
    const auto other = [&](std::size_t k) { return k < pos ? sorted[k] : sorted[k + 1]; };
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = m % 2 == 1 ? other(m / 2) : (other(m / 2 - 1) + other(m / 2)) / 2;
    } else {
      const auto k = static_cast<std::size_t>(std::ceil(0.5 * static_cast<double>(m)));
      out[i] = other(std::min(k == 0 ? 0 : k - 1, m - 1));
    }
  }
  return out;
}

bool known(const Instance& x) { return x.start >= 0 && x.end >= x.start; }

// When a send's rank was done with it: the kernel had its last byte. A capture
// does not time that: its arrival less the flow's latency, not before its start.
Nanos sender_done(const Instance& x, Nanos latency) { return x.sent >= 0 ? x.sent : std::max(x.start, x.end - latency); }

// Least squares y = a + b x; false when x has no spread.
bool fit_line(const std::vector<double>& x, const std::vector<double>& y, double& a, double& b) {
  const auto n = static_cast<double>(x.size());
  if (x.size() < 3) return false;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  if (sxx <= 0 || *hi < 1.5 * *lo) return false;
  b = sxy / sxx;
  a = my - b * mx;
  return b > 0;
}

// The timed instances of `ops` in iteration i, by start.
std::vector<std::pair<Nanos, OpIndex>> in_start_order(const Timeline& t, const std::vector<OpIndex>& ops, std::size_t i) {
  std::vector<std::pair<Nanos, OpIndex>> out;
  for (OpIndex o : ops) {
    if (known(t.ops[o][i])) out.emplace_back(t.ops[o][i].start, o);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The iterations whose means count: after the warm-up, unless that leaves none.
std::size_t first_counted(std::size_t iterations, std::size_t warmup) { return iterations > warmup ? warmup : 0; }

}  // namespace

std::vector<FlowFit> fit_flows(const Profile& p, const Timeline& t, std::size_t warmup) {
  std::vector<FlowFit> fits(p.flows.size());
  if (t.ops.size() != p.ops.size()) return fits;
  const std::size_t from = first_counted(t.iterations, warmup);
  struct Msg {
    std::size_t it;
    Nanos start, end, sent;
    Bytes bytes;
  };
  std::vector<std::vector<Msg>> by_flow(p.flows.size());
  for (std::size_t o = 0; o < p.ops.size(); ++o) {
    const Op& op = p.ops[o];
    if (op.type != OpType::send) continue;
    for (std::size_t i = from; i < t.ops[o].size(); ++i) {
      const Instance& x = t.ops[o][i];
      if (known(x)) by_flow[op.flow].push_back({i, x.start, x.end, x.sent >= x.start && x.sent <= x.end ? x.sent : -1, op.bytes});
    }
  }
  for (std::size_t f = 0; f < p.flows.size(); ++f) {
    auto& m = by_flow[f];
    std::sort(m.begin(), m.end(), [](const Msg& a, const Msg& b) { return std::tie(a.it, a.start, a.end) < std::tie(b.it, b.start, b.end); });
    // Back-to-back messages show the time one holds the flow (the gap between
    // their arrivals); the others the whole time to the receipt.
    std::vector<double> qb, qg;
    std::vector<std::size_t> alone;
    for (std::size_t k = 0; k < m.size(); ++k) {
      if (k > 0 && m[k].it == m[k - 1].it && m[k].start < m[k - 1].end && m[k].end > m[k - 1].end) {
        qb.push_back(static_cast<double>(m[k].bytes));
        qg.push_back(static_cast<double>(m[k].end - m[k - 1].end));
      } else {
        alone.push_back(k);
      }
    }
    FlowFit& fit = fits[f];
    fit.messages = m.size();
    // A replay's records say when the sender was done with each message: the
    // flow's hold is then measured, and the rest is its latency.
    std::vector<double> hb, hh;
    std::vector<Nanos> hl;
    for (std::size_t k = 0; k < m.size(); ++k) {
      const Msg& x = m[k];
      if (x.sent < 0) continue;
      hb.push_back(static_cast<double>(x.bytes));
      hh.push_back(static_cast<double>(x.sent - x.start));
      // The latency of a message that did not queue behind the one before on the path.
      if (k == 0 || m[k - 1].it != x.it || m[k - 1].end <= x.sent) hl.push_back(x.end - x.sent);
    }
    if (!hb.empty() && hb.size() * 2 >= m.size()) {
      double a = 0, b = 0;
      if (!fit_line(hb, hh, a, b)) {
        a = 0;
        const double sb = std::accumulate(hb.begin(), hb.end(), 0.0);
        b = sb > 0 ? std::accumulate(hh.begin(), hh.end(), 0.0) / sb : 0;
      }
      a = std::clamp(a, 0.0, *std::min_element(hh.begin(), hh.end()));
      if (b > 0) {
        fit.bps = 8e9 / b;
        fit.per_message = static_cast<Nanos>(std::llround(a));
        fit.latency = median_of(std::move(hl));
        // Back-to-back arrivals: the path's rate.
        double pa = 0, pb = 0;
        if (!fit_line(qb, qg, pa, pb)) {
          const double sb = std::accumulate(qb.begin(), qb.end(), 0.0);
          pb = sb > 0 ? std::accumulate(qg.begin(), qg.end(), 0.0) / sb : 0;
        }
        if (pb > 0) fit.path_bps = 8e9 / pb;
        fit.fitted = true;
        continue;
      }
    }
    double a = 0, b = 0;  // ns, ns per byte
    if (fit_line(qb, qg, a, b)) {
      a = std::clamp(a, 0.0, *std::min_element(qg.begin(), qg.end()));
    } else if (!qb.empty() && std::accumulate(qb.begin(), qb.end(), 0.0) > 0) {
      a = 0;
      b = std::accumulate(qg.begin(), qg.end(), 0.0) / std::accumulate(qb.begin(), qb.end(), 0.0);
    } else {
      // No back-to-back messages: the whole time, as a line if sizes differ.
      std::vector<double> ub, ud;
      for (std::size_t k : alone) ub.push_back(static_cast<double>(m[k].bytes)), ud.push_back(static_cast<double>(m[k].end - m[k].start));
      double la = 0, lb = 0;
      if (fit_line(ub, ud, la, lb)) {
        b = lb;
        a = 0;
      } else if (std::accumulate(ub.begin(), ub.end(), 0.0) > 0) {
        b = std::accumulate(ud.begin(), ud.end(), 0.0) / std::accumulate(ub.begin(), ub.end(), 0.0);
      }
    }
    if (!(b > 0)) continue;
    std::vector<Nanos> lat;
    for (std::size_t k : alone) {
      const double hold = a + b * static_cast<double>(m[k].bytes);
      lat.push_back(std::max<Nanos>(0, static_cast<Nanos>(std::llround(static_cast<double>(m[k].end - m[k].start) - hold))));
    }
    fit.bps = 8e9 / b;
    fit.per_message = static_cast<Nanos>(std::llround(a));
    fit.latency = median_of(std::move(lat));
    fit.fitted = true;
  }
  return fits;
}

CriticalPath critical_path(const SimGraph& g, const GraphSimRun& run, std::size_t from, const std::vector<double>& stack_share) {
  CriticalPath cp;
  cp.rank_compute.assign(g.ranks, 0);
  const std::size_t n = run.iterations;
  if (run.instances.empty() || n == 0) return cp;
  from = from < n ? from : 0;
  std::vector<Nanos> op_time(g.ops.size(), 0);
  std::vector<std::array<Nanos, 4>> op_kinds(g.ops.size(), {0, 0, 0, 0});
  double stack = 0;
  const std::size_t counted = n - from;
  for (std::size_t i = from; i < n; ++i) {
    // The instance that ended iteration i last: an op of the last rank, or a message to it.
    Nanos best = -1;
    OpIndex cur = 0;
    bool recv = false;
    for (OpIndex o = 0; o < g.ops.size(); ++o) {
      const SimInstance& x = run.at(o, i);
      if (x.end > best) best = x.end, cur = o, recv = false;
      if (g.ops[o].type == OpType::send && x.received > best) best = x.received, cur = o, recv = true;
    }
    if (best < 0) continue;
    Nanos comp = 0;
    Nanos total = 0;
    std::uint32_t it = static_cast<std::uint32_t>(i);
    for (std::size_t guard = 0; guard < 4 * g.ops.size() + 16; ++guard) {
      const SimInstance& x = run.at(cur, it);
      const SimGraph::Node& node = g.ops[cur];
      const auto add = [&](Nanos d, std::uint8_t kind) {
        if (d <= 0) return;
        total += d;
        op_time[cur] += d;
        op_kinds[cur][kind] += d;
        switch (kind) {
          case 0: cp.compute += d, comp += d, cp.rank_compute[node.rank] += d; break;
          case 1:
            cp.network += d;
            if (node.flow < stack_share.size()) stack += static_cast<double>(d) * stack_share[node.flow];
            break;
          case 2: cp.receipt += d; break;
          default: cp.gap += d; break;
        }
      };
      if (recv) {
        add(x.received - x.end, 2);
        recv = false;
      }
      add(x.end - x.start, node.type == OpType::compute ? 0 : 1);
      add(x.start - x.dispatched, 3);
      if (x.held && x.held_iteration == it) {
        cur = x.held_op;
        continue;
      }
      if (x.held) break;  // held by the iteration before
      add(x.dispatched - x.ready, 3);
      if (!x.has_cause || x.cause_iteration != it) break;
      cur = x.cause_op;
      recv = x.cause_recv;
    }
    cp.length += total;
    cp.compute_share.push_back(total > 0 ? static_cast<double>(comp) / static_cast<double>(total) : 0);
  }
  const auto per = [&](Nanos v) { return counted == 0 ? 0 : v / static_cast<Nanos>(counted); };
  cp.length = per(cp.length);
  cp.compute = per(cp.compute);
  cp.network = per(cp.network);
  cp.receipt = per(cp.receipt);
  cp.gap = per(cp.gap);
  for (Nanos& r : cp.rank_compute) r = per(r);
  if (!stack_share.empty()) {
    cp.split = true;
    cp.in_stack = per(static_cast<Nanos>(stack));
    cp.on_wire = cp.network - cp.in_stack;
  }
  std::vector<OpIndex> order(g.ops.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t top = std::min<std::size_t>(10, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](OpIndex a, OpIndex b) { return op_time[a] > op_time[b]; });
  static const char* kKinds[] = {"compute", "network", "receipt", "gap"};
  for (std::size_t k = 0; k < top && op_time[order[k]] > 0; ++k) {
    const auto& kinds = op_kinds[order[k]];
    const auto most = static_cast<std::size_t>(std::max_element(kinds.begin(), kinds.end()) - kinds.begin());
    cp.top.push_back({order[k], per(op_time[order[k]]), kKinds[most]});
  }
  return cp;
}

namespace {

struct Model {
  std::size_t n = 0;  // iterations simulated (all measured ones)
  std::size_t from = 0;  // first counted
  SimGraph actual;
  SimGraph ideal;
  std::vector<std::vector<Nanos>> measured_dur;  // [op][it] compute, measured or planned
  std::vector<Nanos> ideal_dur;  // [op] compute
  std::vector<std::vector<Nanos>> measured_lag;  // [op][it]
  std::vector<std::vector<Nanos>> measured_hold, measured_path;  // [op][it], sends
  std::vector<Nanos> ideal_hold, ideal_path;  // [op], sends
  std::vector<Nanos> ideal_lag;  // [op]
  std::vector<FlowModel> actual_flow, ideal_flow;
  std::vector<std::size_t> group_of_rank;
  std::vector<std::vector<RankId>> groups;  // ranks of one role and shape
  std::vector<std::vector<RankId>> roles;  // the ranks of each role present
  std::vector<std::size_t> role_of_rank;  // [rank]: its role's index in roles

  unsigned threads = 1;  // for the what-ifs: parallel()
  const DiagnosisOptions* options = nullptr;

  // work(0 .. n-1), each a what-if on its own copy of a graph, on `threads`;
  // the stage's progress told as each ends.
  void parallel(const char* stage, std::size_t n, const std::function<void(std::size_t)>& work, unsigned on = 0) const {
    std::mutex told;
    std::size_t done = 0;
    parallel_for(n, on != 0 ? on : threads, [&](std::size_t i) {
      work(i);
      if (options == nullptr || !options->progress) return;
      const std::lock_guard<std::mutex> lock(told);
      options->progress(stage, ++done, n);
    });
  }

  Nanos mean(const SimGraph& g, GraphSimRun* keep = nullptr) const {
    GraphSimOptions so;
    so.record = keep != nullptr;
    GraphSimRun r = simulate_graph(g, so);
    const auto m = static_cast<Nanos>(std::llround(r.mean_iteration(from)));
    if (keep) *keep = std::move(r);
    return m;
  }
};

std::string rank_place(const DiagnosisInput& in, RankId r) {
  return r < in.hosts.size() && !in.hosts[r].empty() ? in.hosts[r] : "rank " + std::to_string(r);
}

int flow_class(const Profile& p, FlowIndex f) {
  return static_cast<int>(p.ranks[p.flows[f].src].role) * 2 + static_cast<int>(p.ranks[p.flows[f].dst].role);
}

void apply_flows(SimGraph& g, const std::vector<FlowModel>& m) { g.flows = m; }

}  // namespace

namespace {

// Each rank's link capacity as the run used it, egress and ingress: the bytes
// of its flows over the time any of them had a message between ready and
// arrival (the union of those intervals, per counted iteration). A link the job
// kept busy gives its capacity; one it did not, the rate its messages reached.
RankLinks fitted_links(const Profile& p, const Timeline& t, std::size_t from) {
  RankLinks links(p.ranks.size());
  std::vector<std::vector<OpIndex>> out(p.ranks.size()), in(p.ranks.size());
  for (OpIndex op = 0; op < p.ops.size(); ++op) {
    if (p.ops[op].type != OpType::send || op >= t.ops.size()) continue;
    out[p.flows[p.ops[op].flow].src].push_back(op);
    in[p.flows[p.ops[op].flow].dst].push_back(op);
  }
  const auto rate = [&](const std::vector<OpIndex>& ops) {
    double bytes = 0, busy = 0;
    std::vector<std::pair<Nanos, Nanos>> iv;
    for (std::size_t i = from; i < t.iterations; ++i) {
      iv.clear();
      for (OpIndex op : ops) {
        if (i >= t.ops[op].size()) continue;
        const Instance& x = t.ops[op][i];
        if (x.start < 0 || x.end <= x.start) continue;
        iv.emplace_back(x.start, x.end);
        bytes += static_cast<double>(p.ops[op].bytes);
      }
      std::sort(iv.begin(), iv.end());
      Nanos a = -1, b = -1;
      for (const auto& [s, e] : iv) {
        if (s > b) {
          if (b > a) busy += static_cast<double>(b - a);
          a = s, b = e;
        } else {
          b = std::max(b, e);
        }
      }
      if (b > a) busy += static_cast<double>(b - a);
    }
    return busy > 0 && bytes > 0 ? bytes * 8e9 / busy : 0.0;
  };
  for (RankId r = 0; r < p.ranks.size(); ++r) {
    links[r].egress_bps = rate(out[r]);
    links[r].ingress_bps = rate(in[r]);
  }
  return links;
}

}  // namespace

unsigned what_if_threads(unsigned asked, std::size_t n, std::size_t each) {
  return asked != 0 ? asked : threads_for(n, each, kWhatIfMemory);
}

Diagnosis diagnose(const DiagnosisInput& in, const DiagnosisOptions& o) {
  const Profile& p = in.profile;
  const Timeline& t = in.measured;
  if (t.iterations == 0 || t.ops.size() != p.ops.size()) throw std::invalid_argument("no timed iteration to analyse");
  Diagnosis d;
  d.source = in.source;
  d.factors = o.compress_factors;
  d.compress_ns_per_byte = o.compress_ns_per_byte;
  d.threshold = o.threshold;
  Model m;
  m.n = t.iterations;
  m.from = first_counted(m.n, o.warmup);
  d.iterations = m.n - m.from;

  std::vector<Nanos> its;
  for (std::size_t i = m.from; i < t.iteration.size(); ++i) {
    if (t.iteration[i] >= 0) its.push_back(t.iteration[i]);
  }
  if (its.empty()) throw std::invalid_argument("no timed iteration to analyse");
  d.measured = std::accumulate(its.begin(), its.end(), Nanos{0}) / static_cast<Nanos>(its.size());

  // Flows: fitted, else the median of their class.
  d.flows = fit_flows(p, t, o.warmup);
  std::map<int, std::vector<FlowIndex>> classes;
  for (FlowIndex f = 0; f < p.flows.size(); ++f) classes[flow_class(p, f)].push_back(f);
  std::vector<FlowModel> class_median(4);
  std::vector<double> all_bps;
  for (const FlowFit& f : d.flows) {
    if (f.fitted) all_bps.push_back(f.bps);
  }
  for (const auto& [c, fl] : classes) {
    std::vector<double> bps, path;
    std::vector<Nanos> pm, lat;
    for (FlowIndex f : fl) {
      if (!d.flows[f].fitted) continue;
      bps.push_back(d.flows[f].bps), pm.push_back(d.flows[f].per_message), lat.push_back(d.flows[f].latency);
      if (d.flows[f].path_bps > 0) path.push_back(d.flows[f].path_bps);
    }
    FlowModel fm;
    fm.path_bps = path.size() * 2 > bps.size() ? median_double(path) : 0;
    fm.bps = !bps.empty() ? median_double(bps) : !all_bps.empty() ? median_double(all_bps) : 10e9;
    fm.per_message = median_of(pm);
    fm.latency = median_of(lat);
    class_median[static_cast<std::size_t>(c)] = fm;
  }
  std::size_t unfitted = 0;
  std::vector<bool> has_sends(p.flows.size(), false);
  for (const Op& op : p.ops) {
    if (op.type == OpType::send) has_sends[op.flow] = true;
  }
  for (FlowIndex f = 0; f < p.flows.size(); ++f) {
    FlowModel fm = class_median[static_cast<std::size_t>(flow_class(p, f))];
    if (d.flows[f].fitted) {
      fm.bps = d.flows[f].bps, fm.per_message = d.flows[f].per_message, fm.latency = d.flows[f].latency;
      fm.path_bps = d.flows[f].path_bps;
    } else {
      if (has_sends[f]) ++unfitted;
      d.flows[f].bps = fm.bps, d.flows[f].per_message = fm.per_message, d.flows[f].latency = fm.latency;
      d.flows[f].path_bps = fm.path_bps;
    }
    fm.read_lag = 0;  // in the fitted latency: the measured end is the receipt
    m.actual_flow.push_back(fm);
    FlowModel im = class_median[static_cast<std::size_t>(flow_class(p, f))];
    im.read_lag = 0;
    m.ideal_flow.push_back(im);
  }
  if (unfitted > 0) d.notes.push_back(std::to_string(unfitted) + " flow(s) had too few timed messages for a fit and take their class's median");

  // Compute: measured per iteration. Gaps: how long each op waited beyond its
  // dependencies and its busy rank, as measured (the agent's or framework's
  // own delay), where that can be told; else the profile's gap.
  m.measured_dur.assign(p.ops.size(), {});
  m.measured_lag.assign(p.ops.size(), {});
  std::vector<std::vector<OpIndex>> rank_ops(p.ranks.size() * 2);  // [rank * 2 + type]: the rank's ops of each type
  for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
    const Op& op = p.ops[o2];
    rank_ops[op.rank * 2 + (op.type == OpType::send ? 1 : 0)].push_back(o2);
    if (op.type != OpType::compute) continue;
    auto& v = m.measured_dur[o2];
    v.resize(m.n);
    for (std::size_t i = 0; i < m.n; ++i) {
      const Instance& x = t.ops[o2][i];
      v[i] = known(x) ? x.end - x.start : op.duration_in(i);
    }
  }
  {
    // The end of the compute op before each one on its rank, by start.
    std::vector<Nanos> prev_end(p.ops.size() * m.n, -1);
    for (RankId r = 0; r < p.ranks.size(); ++r) {
      const auto& comp = rank_ops[r * 2];
      for (std::size_t i = 0; i < m.n; ++i) {
        const auto by_start = in_start_order(t, comp, i);
        for (std::size_t k = 1; k < by_start.size(); ++k) prev_end[by_start[k].second * m.n + i] = t.ops[by_start[k - 1].second][i].end;
      }
    }
    // A send waits for its flow: the message before it on the flow held it until
    // its arrival less the flow's latency.
    std::vector<std::vector<OpIndex>> flow_ops(p.flows.size());
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      if (p.ops[o2].type == OpType::send) flow_ops[p.ops[o2].flow].push_back(o2);
    }
    for (FlowIndex f = 0; f < p.flows.size(); ++f) {
      for (std::size_t i = 0; i < m.n; ++i) {
        const auto by_start = in_start_order(t, flow_ops[f], i);
        for (std::size_t k = 1; k < by_start.size(); ++k) {
          const Instance& prev = t.ops[by_start[k - 1].second][i];
          prev_end[by_start[k].second * m.n + i] = sender_done(prev, m.actual_flow[f].latency);
        }
      }
    }
    // When each rank entered each iteration: its first start in it (an op
    // without dependencies starts then; messages that came sooner waited).
    std::vector<Nanos> entry(p.ranks.size() * m.n, -1);
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      for (std::size_t i = 0; i < m.n; ++i) {
        const Instance& x = t.ops[o2][i];
        Nanos& e = entry[p.ops[o2].rank * m.n + i];
        if (known(x) && (e < 0 || x.start < e)) e = x.start;
      }
    }
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      const Op& op = p.ops[o2];
      auto& g = m.measured_lag[o2];
      g.resize(m.n);
      for (std::size_t i = 0; i < m.n; ++i) {
        g[i] = 0;
        const Instance& x = t.ops[o2][i];
        if (!known(x)) continue;
        Nanos ready = -1;
        bool told = true;
        for (const Dependency& dep : op.after) {
          if (dep.iterations_back != 0) continue;  // another iteration's base
          const Op& d2 = p.ops[dep.op];
          const Instance& y = t.ops[dep.op][i];
          if (!known(y)) {
            told = false;
            break;
          }
          // A send's own rank goes on once the kernel has its last byte (the
          // simulator's and the executor's send_done), not at its arrival.
          // Without that time (a capture), its arrival less the flow's latency.
          const bool own_send = !dep.recv && d2.type == OpType::send;
          ready = std::max(ready, own_send ? sender_done(y, m.actual_flow[d2.flow].latency) : y.end);
        }
        if (p.iteration_barrier) ready = std::max(ready, entry[op.rank * m.n + i]);
        if (ready >= 0) ready += op.gap_in(i);
        ready = std::max(ready, prev_end[o2 * m.n + i]);
        if (!told || ready < 0 || x.start < ready) continue;
        g[i] = x.start - ready;
      }
    }
  }
  // Each message's own hold and path time, as measured (FlowModel where not).
  m.measured_hold.assign(p.ops.size(), {});
  m.measured_path.assign(p.ops.size(), {});
  {
    std::vector<std::vector<OpIndex>> flow_ops(p.flows.size());
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      if (p.ops[o2].type != OpType::send) continue;
      flow_ops[p.ops[o2].flow].push_back(o2);
      const FlowModel& fm = m.actual_flow[p.ops[o2].flow];
      const Nanos hold = fm.per_message + static_cast<Nanos>(std::ceil(static_cast<double>(p.ops[o2].bytes) * 8e9 / fm.bps));
      m.measured_hold[o2].assign(m.n, hold);
      m.measured_path[o2].assign(m.n, fm.latency);
    }
    for (FlowIndex f = 0; f < p.flows.size(); ++f) {
      for (std::size_t i = 0; i < m.n; ++i) {
        const auto by_start = in_start_order(t, flow_ops[f], i);
        Nanos prev_arrival = -1;
        for (const auto& [start, o2] : by_start) {
          const Instance& x = t.ops[o2][i];
          Nanos& hold = m.measured_hold[o2][i];
          if (x.sent >= x.start && x.sent <= x.end) hold = x.sent - x.start;
          const Nanos out = x.start + hold;
          m.measured_path[o2][i] = std::max<Nanos>(0, x.end - std::max(out, prev_arrival));
          prev_arrival = std::max(prev_arrival, x.end);
        }
      }
    }
  }

  // Peers: ranks of the same role and shape; an op's peers are the ops at its
  // place among their ranks' ops of its type.
  std::map<std::tuple<int, std::size_t, std::size_t>, std::size_t> group_index;
  m.group_of_rank.assign(p.ranks.size(), 0);
  for (RankId r = 0; r < p.ranks.size(); ++r) {
    const auto key = std::make_tuple(static_cast<int>(p.ranks[r].role), rank_ops[r * 2].size(), rank_ops[r * 2 + 1].size());
    auto [itg, fresh] = group_index.emplace(key, m.groups.size());
    if (fresh) m.groups.emplace_back();
    m.groups[itg->second].push_back(r);
    m.group_of_rank[r] = itg->second;
  }
  m.ideal_dur.assign(p.ops.size(), 0);
  m.ideal_lag.assign(p.ops.size(), 0);
  m.ideal_hold.assign(p.ops.size(), 0);
  m.ideal_path.assign(p.ops.size(), 0);
  const auto counted_part = [&](const std::vector<Nanos>& v, std::vector<Nanos>& into) {
    if (!v.empty()) into.insert(into.end(), v.begin() + static_cast<std::ptrdiff_t>(m.from), v.end());
  };
  for (const auto& grp : m.groups) {
    for (int type = 0; type < 2; ++type) {
      const std::size_t per_rank = rank_ops[grp.front() * 2 + type].size();
      for (std::size_t j = 0; j < per_rank; ++j) {
        std::vector<Nanos> dur, lag, hold, path;
        for (RankId r : grp) {
          const OpIndex o2 = rank_ops[r * 2 + type][j];
          counted_part(m.measured_dur[o2], dur);
          counted_part(m.measured_lag[o2], lag);
          counted_part(m.measured_hold[o2], hold);
          counted_part(m.measured_path[o2], path);
        }
        const Nanos dmed = median_of(std::move(dur)), lmed = median_of(std::move(lag));
        const Nanos hmed = median_of(std::move(hold)), pmed = median_of(std::move(path));
        for (RankId r : grp) {
          const OpIndex o2 = rank_ops[r * 2 + type][j];
          m.ideal_dur[o2] = dmed;
          m.ideal_lag[o2] = lmed;
          m.ideal_hold[o2] = hmed;
          m.ideal_path[o2] = pmed;
        }
      }
    }
  }
  // A message's hold and path belong to its link: its peers are the messages at
  // its place on the flows of the same class and length (a server's flows to
  // each worker are peers of one another, though the server has no peer rank).
  {
    std::vector<std::vector<OpIndex>> flow_ops(p.flows.size());
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      if (p.ops[o2].type == OpType::send) flow_ops[p.ops[o2].flow].push_back(o2);
    }
    std::map<std::pair<int, std::size_t>, std::vector<FlowIndex>> flow_groups;
    for (FlowIndex f = 0; f < p.flows.size(); ++f) flow_groups[{flow_class(p, f), flow_ops[f].size()}].push_back(f);
    for (const auto& entry : flow_groups) {
      const std::vector<FlowIndex>& fl = entry.second;
      for (std::size_t j = 0; j < flow_ops[fl.front()].size(); ++j) {
        std::vector<Nanos> hold, path;
        for (FlowIndex f : fl) {
          counted_part(m.measured_hold[flow_ops[f][j]], hold);
          counted_part(m.measured_path[flow_ops[f][j]], path);
        }
        const Nanos hmed = median_of(std::move(hold)), pmed = median_of(std::move(path));
        for (FlowIndex f : fl) m.ideal_hold[flow_ops[f][j]] = hmed, m.ideal_path[flow_ops[f][j]] = pmed;
      }
    }
  }
  // A built profile's ranks of one role need not have the same ops (a wait
  // becomes a compute op on one rank and a send's gap on another), so a rank
  // alone in its shape would be its own peer. A shape's compute is brought to
  // its role's: scaled by the role's median compute over the shape's.
  {
    std::map<Role, std::size_t> role_index;
    m.role_of_rank.assign(p.ranks.size(), 0);
    for (RankId r = 0; r < p.ranks.size(); ++r) {
      auto [it, fresh] = role_index.emplace(p.ranks[r].role, m.roles.size());
      if (fresh) m.roles.emplace_back();
      m.roles[it->second].push_back(r);
      m.role_of_rank[r] = it->second;
    }
  }
  {
    std::vector<Nanos> total(p.ranks.size(), 0);
    for (RankId r = 0; r < p.ranks.size(); ++r) {
      for (OpIndex op : rank_ops[r * 2]) {
        for (std::size_t i = m.from; i < m.n; ++i) total[r] += m.measured_dur[op][i];
      }
    }
    const auto median_total = [&](const std::vector<RankId>& ranks) {
      std::vector<Nanos> v;
      for (RankId q : ranks) v.push_back(total[q]);
      return median_of(std::move(v));
    };
    std::vector<Nanos> shape_median, role_median;  // once per group and role, not per rank
    for (const auto& grp : m.groups) shape_median.push_back(median_total(grp));
    for (const auto& role : m.roles) role_median.push_back(median_total(role));
    for (RankId r = 0; r < p.ranks.size(); ++r) {
      const Nanos shape = shape_median[m.group_of_rank[r]], role = role_median[m.role_of_rank[r]];
      if (shape <= 0 || shape == role) continue;
      const double factor = static_cast<double>(role) / static_cast<double>(shape);
      for (OpIndex op : rank_ops[r * 2]) m.ideal_dur[op] = static_cast<Nanos>(std::llround(static_cast<double>(m.ideal_dur[op]) * factor));
    }
  }
  std::vector<std::vector<OpIndex>> rank_compute(p.ranks.size()), rank_all(p.ranks.size());
  for (RankId r = 0; r < p.ranks.size(); ++r) {
    rank_compute[r] = rank_ops[r * 2];
    rank_all[r] = rank_ops[r * 2];
    rank_all[r].insert(rank_all[r].end(), rank_ops[r * 2 + 1].begin(), rank_ops[r * 2 + 1].end());
  }

  FlowModel base_link;
  m.actual = sim_graph(p, base_link);
  m.actual.iterations = m.n;
  for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
    if (p.ops[o2].type == OpType::compute) m.actual.set_durations(o2, m.measured_dur[o2]);
    m.actual.set_lags(o2, m.measured_lag[o2]);
    if (p.ops[o2].type == OpType::send) m.actual.set_holds(o2, m.measured_hold[o2]), m.actual.set_paths(o2, m.measured_path[o2]);
  }
  apply_flows(m.actual, m.actual_flow);
  m.ideal = m.actual;
  for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
    if (p.ops[o2].type == OpType::compute) m.ideal.set_durations(o2, {m.ideal_dur[o2]});
    m.ideal.set_lags(o2, {m.ideal_lag[o2]});
    if (p.ops[o2].type == OpType::send) m.ideal.set_holds(o2, {m.ideal_hold[o2]}), m.ideal.set_paths(o2, {m.ideal_path[o2]});
  }
  apply_flows(m.ideal, m.ideal_flow);
  // A what-if holds a copy of the graph and the simulation's own arrays: as
  // many at once as cores, within kWhatIfMemory.
  const std::size_t each = what_if_bytes(m.actual);
  m.threads = what_if_threads(o.threads, std::numeric_limits<std::size_t>::max(), each);

  // The job as measured, its every op instance kept, beside the ideal.
  GraphSimRun actual_run;
  const std::size_t kept = p.ops.size() * m.n * sizeof(SimInstance);
  m.options = &o;
  m.parallel("the job as measured and ideal", 2, [&](std::size_t j) {
    if (j == 0) d.simulated = m.mean(m.actual, &actual_run);
    else d.ideal = m.mean(m.ideal);
  }, what_if_threads(o.threads, 2, each + kept));
  d.sim_error = d.measured > 0 ? static_cast<double>(d.simulated - d.measured) / static_cast<double>(d.measured) : 0;
  d.reproduces = std::abs(d.sim_error) <= 0.10;
  if (!d.reproduces) {
    d.notes.push_back("the simulation of the job as measured is " + std::to_string(static_cast<int>(std::lround(d.sim_error * 100))) +
                      "% off its measured iteration time: the what-if figures are less reliable");
  }

  // Who waited for whom, in the job as measured: an op whose last dependency to
  // be met was a message from another rank left its rank (compute) or flow
  // (send) idle from when that was free and its other dependencies were met.
  // The wait goes to the rank whose own work began the chain of messages that
  // arrived last: a message that was late because its sender waited for another
  // rank's message passes the blame on.
  std::vector<Nanos> waited(p.ranks.size(), 0);
  {
    const std::size_t ni = m.n;
    std::vector<std::int64_t> root(p.ops.size() * ni, -2);  // -2: not yet known
    const auto root_of = [&](OpIndex op, std::size_t it) {
      // Follow the causes while they are receipts of messages from other ranks.
      std::vector<std::size_t> chain;
      std::size_t k = op * ni + it;
      std::int64_t found = -1;
      for (std::size_t guard = 0; guard < p.ops.size() * ni + 1; ++guard) {
        if (root[k] != -2) {
          found = root[k];
          break;
        }
        chain.push_back(k);
        const SimInstance& x = actual_run.instances[k];
        const OpIndex o2 = static_cast<OpIndex>(k / ni);
        if (!x.has_cause || !x.cause_recv || m.actual.ops[x.cause_op].rank == m.actual.ops[o2].rank) {
          found = m.actual.ops[o2].rank;
          break;
        }
        k = static_cast<std::size_t>(x.cause_op) * ni + x.cause_iteration;
      }
      for (std::size_t c : chain) root[c] = found;
      return found;
    };
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      const SimGraph::Node& node = m.actual.ops[o2];
      for (std::size_t i = m.from; i < m.n; ++i) {
        const SimInstance& x = actual_run.at(o2, i);
        if (!x.has_cause || !x.cause_recv || x.idle_from < 0) continue;
        if (m.actual.ops[x.cause_op].rank == node.rank) continue;
        Nanos other = std::max(x.idle_from, i > 0 ? actual_run.rank_iteration_end[node.rank][i - 1] : Nanos{0});
        for (std::uint32_t k = 0; k < node.dep_count; ++k) {
          const Dependency& dep = m.actual.deps[node.dep_begin + k];
          if (dep.iterations_back > i || (dep.op == x.cause_op && dep.recv && i - dep.iterations_back == x.cause_iteration)) continue;
          const SimInstance& y = actual_run.at(dep.op, i - dep.iterations_back);
          other = std::max(other, dep.recv ? y.received : y.end);
        }
        if (x.ready <= other) continue;
        const std::int64_t q = root_of(x.cause_op, x.cause_iteration);
        if (q >= 0) waited[static_cast<std::size_t>(q)] += x.ready - other;
      }
    }
  }

  // Stragglers.
  const auto per_iteration = [&](Nanos total) { return d.iterations == 0 ? 0 : total / static_cast<Nanos>(d.iterations); };
  std::vector<Nanos> compute(p.ranks.size(), 0);
  for (RankId r = 0; r < p.ranks.size(); ++r) {
    Nanos sum = 0;
    for (OpIndex op : rank_compute[r]) {
      for (std::size_t i = m.from; i < m.n; ++i) sum += m.measured_dur[op][i];
    }
    compute[r] = per_iteration(sum);
  }
  // Each role's median and least compute (its ranks, the rank itself too).
  std::vector<Nanos> role_compute, role_best;
  for (const auto& role : m.roles) {
    std::vector<Nanos> v;
    for (RankId q : role) v.push_back(compute[q]);
    role_best.push_back(*std::min_element(v.begin(), v.end()));
    role_compute.push_back(median_of(std::move(v)));
  }
  for (RankId r = 0; r < p.ranks.size(); ++r) {
    Straggler s;
    s.rank = r;
    s.host = rank_place(in, r);
    s.compute = compute[r];
    const std::size_t role = m.role_of_rank[r];
    const Nanos best = std::min(compute[r], role_best[role]);
    s.peers_compute = role_compute[role];
    s.score = compute[r] > 0 && m.roles[role].size() > 1 ? 1.0 - static_cast<double>(best) / static_cast<double>(compute[r]) : 0;
    s.waited_on = per_iteration(waited[r]);
    d.stragglers.push_back(s);
  }
  // What-if for the ranks most likely to matter.
  std::vector<std::size_t> order(d.stragglers.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(d.stragglers[a].score, d.stragglers[a].waited_on) > std::tie(d.stragglers[b].score, d.stragglers[b].waited_on);
  });
  constexpr std::size_t kWhatIfs = 16;
  // Two simulations per rank tried (its impact on the ideal, the job without
  // it), each on its own copy of the graph, in parallel.
  const std::size_t tried = std::min(order.size(), kWhatIfs);
  m.parallel("ranks", 2 * tried, [&](std::size_t j) {
    Straggler& s = d.stragglers[order[j / 2]];
    if (rank_all[s.rank].empty()) return;
    const bool impact = j % 2 == 0;
    SimGraph g = impact ? m.ideal : m.actual;
    for (OpIndex op : rank_all[s.rank]) {
      if (p.ops[op].type == OpType::compute) {
        if (impact) g.set_durations(op, m.measured_dur[op]);
        else g.set_durations(op, {m.ideal_dur[op]});
      }
      if (impact) g.set_lags(op, m.measured_lag[op]);
      else g.set_lags(op, {m.ideal_lag[op]});
    }
    if (impact) s.impact = m.mean(g) - d.ideal;
    else s.without = d.simulated - m.mean(g);
  });
  // Named: its impact exceeds the median impact of the others by the threshold
  // (every rank's own jitter costs something; a straggler stands out).
  const auto excess = [](const auto& items) {
    std::vector<Nanos> impact;
    for (const auto& x : items) impact.push_back(x.impact);
    std::vector<Nanos> over = medians_of_others(impact);
    for (std::size_t k = 0; k < items.size(); ++k) over[k] = impact[k] - over[k];
    return over;
  };
  const auto named = [&](Nanos over) { return static_cast<double>(over) >= o.threshold * static_cast<double>(d.ideal); };
  {
    const std::vector<Nanos> over = excess(d.stragglers);
    for (std::size_t k = 0; k < d.stragglers.size(); ++k) d.stragglers[k].named = named(over[k]);
  }
  std::stable_sort(d.stragglers.begin(), d.stragglers.end(), [](const Straggler& a, const Straggler& b) { return a.impact > b.impact; });

  // Links, per host pair.
  std::map<std::pair<std::string, std::string>, std::vector<FlowIndex>> pairs;
  for (FlowIndex f = 0; f < p.flows.size(); ++f) {
    std::string a = rank_place(in, p.flows[f].src), b = rank_place(in, p.flows[f].dst);
    if (b < a) std::swap(a, b);
    pairs[{a, b}].push_back(f);
  }
  std::vector<Bytes> flow_bytes(p.flows.size(), 0);
  for (const Op& op : p.ops) {
    if (op.type == OpType::send) flow_bytes[op.flow] += op.bytes;
  }
  for (const auto& [key, fl] : pairs) {
    SlowLink l;
    l.a = key.first, l.b = key.second;
    l.flows = fl;
    double w = 0, rate_inv = 0;
    Bytes bytes = 0;
    Nanos busy = 0;
    std::vector<double> peer_bps;
    std::vector<Nanos> peer_pm, peer_lat;
    for (FlowIndex f : fl) {
      const double wf = static_cast<double>(std::max<Bytes>(flow_bytes[f], 1));
      w += wf;
      rate_inv += wf / d.flows[f].bps;
      l.per_message = std::max(l.per_message, d.flows[f].per_message);
      l.latency = std::max(l.latency, d.flows[f].latency);
      if (f < t.flow_bytes.size()) bytes += t.flow_bytes[f], busy += t.flow_busy[f];
      if (f < in.evidence.size() && in.evidence[f].known) {
        const FlowEvidence& e = in.evidence[f];
        FlowEvidence& worst = l.evidence;
        worst.known = true;
        worst.in_stack = std::max(worst.in_stack, e.in_stack);
        worst.retransmits += e.retransmits;
        worst.rwnd_limited = std::max(worst.rwnd_limited, e.rwnd_limited);
        worst.sndbuf_limited = std::max(worst.sndbuf_limited, e.sndbuf_limited);
        worst.cwnd = worst.cwnd == 0 ? e.cwnd : std::min(worst.cwnd, e.cwnd);
        worst.rtt = std::max(worst.rtt, e.rtt);
      }
    }
    for (const auto& [c, members] : classes) {
      bool mine = false;
      for (FlowIndex f : fl) mine = mine || flow_class(p, f) == c;
      if (!mine) continue;
      for (FlowIndex f : members) {
        if (std::find(fl.begin(), fl.end(), f) != fl.end() || !d.flows[f].fitted) continue;
        peer_bps.push_back(d.flows[f].bps), peer_pm.push_back(d.flows[f].per_message), peer_lat.push_back(d.flows[f].latency);
      }
    }
    l.rate_bps = rate_inv > 0 ? w / rate_inv : 0;
    l.achieved_bps = busy > 0 ? static_cast<double>(bytes) * 8e9 / static_cast<double>(busy) : 0;
    l.peers_bps = median_double(peer_bps);
    l.peers_per_message = median_of(peer_pm);
    l.peers_latency = median_of(peer_lat);
    d.links.push_back(std::move(l));
  }
  std::sort(d.links.begin(), d.links.end(), [](const SlowLink& a, const SlowLink& b) {
    const double ra = a.peers_bps > 0 ? a.rate_bps / a.peers_bps : 1, rb = b.peers_bps > 0 ? b.rate_bps / b.peers_bps : 1;
    return ra < rb;
  });
  m.parallel("host pairs", 2 * std::min(d.links.size(), kWhatIfs), [&](std::size_t j) {
    SlowLink& l = d.links[j / 2];
    const bool impact = j % 2 == 0;
    SimGraph g = impact ? m.ideal : m.actual;
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      const Op& op = p.ops[o2];
      if (op.type != OpType::send || std::find(l.flows.begin(), l.flows.end(), op.flow) == l.flows.end()) continue;
      if (impact) g.set_holds(o2, m.measured_hold[o2]), g.set_paths(o2, m.measured_path[o2]);
      else g.set_holds(o2, {m.ideal_hold[o2]}), g.set_paths(o2, {m.ideal_path[o2]});
    }
    if (impact) l.impact = m.mean(g) - d.ideal;
    else l.without = d.simulated - m.mean(g);
  });
  {
    // Slower than the other pairs by what it achieved (bytes over busy time):
    // its fitted hold rate alone can be high when a socket buffer takes the
    // bytes at once and the path behind it is slow.
    std::vector<double> achieved;
    for (const SlowLink& l : d.links) {
      if (l.achieved_bps > 0) achieved.push_back(l.achieved_bps);
    }
    const std::vector<double> others = medians_of_others(achieved);
    const std::vector<Nanos> over = excess(d.links);
    for (std::size_t k = 0, a = 0; k < d.links.size(); ++k) {
      SlowLink& l = d.links[k];
      const bool measured = l.achieved_bps > 0 && achieved.size() > 1;
      const bool slower = measured ? l.achieved_bps < others[a] : l.peers_bps > 0 && l.rate_bps < l.peers_bps;
      if (l.achieved_bps > 0) ++a;
      l.named = k < kWhatIfs && named(over[k]) && slower;
    }
  }
  std::stable_sort(d.links.begin(), d.links.end(), [](const SlowLink& a, const SlowLink& b) { return a.impact > b.impact; });

  // Critical path and verdict, on the job as measured.
  std::vector<double> stack_share;
  for (FlowIndex f = 0; f < p.flows.size() && f < in.evidence.size(); ++f) {
    if (in.evidence[f].stack_share < 0) continue;
    stack_share.resize(p.flows.size(), 0);
    stack_share[f] = in.evidence[f].stack_share;
  }
  d.path = critical_path(m.actual, actual_run, m.from, stack_share);
  {
    Verdict& v = d.verdict;
    const double len = static_cast<double>(std::max<Nanos>(d.path.length, 1));
    v.compute_share = static_cast<double>(d.path.compute) / len;
    v.communication_share = static_cast<double>(d.path.network + d.path.receipt) / len;
    v.bound = v.compute_share >= v.communication_share ? "compute" : "communication";
    for (double s : d.path.compute_share) {
      // Per iteration: compute against everything else on its path that is not a gap is not known
      // here, so the iteration's compute share against one half.
      (s >= 0.5 ? v.iterations_compute : v.iterations_communication) += 1;
    }
    m.parallel("the verdict", 2, [&](std::size_t j) {
      SimGraph g = m.actual;
      if (j == 0) {
        for (FlowModel& f : g.flows) f.bps = 1e18, f.per_message = 0, f.latency = 0, f.read_lag = 0, f.path_bps = 0;
        g.drop_measured_messages();
        v.no_network = m.mean(g);
      } else {
        for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
          if (p.ops[o2].type == OpType::compute) g.set_durations(o2, {0});
        }
        v.no_compute = m.mean(g);
      }
    });
  }

  // Compression: the tensors with the most bytes, one at a time.
  {
    std::map<std::string, std::vector<OpIndex>> groups;
    for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
      const Op& op = p.ops[o2];
      if (op.type == OpType::send && op.bytes > 0) groups[op.tensor.empty() ? op.id : op.tensor].push_back(o2);
    }
    for (auto& [name, ops] : groups) {
      Compression c;
      c.tensor = name;
      c.messages = ops.size();
      for (OpIndex op : ops) c.bytes += p.ops[op].bytes;
      d.compression.push_back(std::move(c));
    }
    std::sort(d.compression.begin(), d.compression.end(), [](const Compression& a, const Compression& b) { return a.bytes > b.bytes; });
    if (d.compression.size() > o.compress_candidates) d.compression.resize(o.compress_candidates);
    // Fewer bytes of one tensor also let the others through sooner where
    // they share a link, so the what-if runs on a model of the links rather
    // than on the measured message times (which hold the queueing behind the
    // compressed tensor): every host's link at the capacity it reached in the
    // run, shared max-min by its flows, compute and lags as measured. The
    // saving is the difference of two runs of that model.
    SimGraph shared = m.actual;
    shared.rank_links = fitted_links(p, t, m.from);
    for (FlowIndex f = 0; f < p.flows.size(); ++f) {
      const RankLink &a = shared.rank_links[p.flows[f].src], &b = shared.rank_links[p.flows[f].dst];
      const double bps = std::min(a.egress_bps > 0 ? a.egress_bps : 1e18, b.ingress_bps > 0 ? b.ingress_bps : 1e18);
      const Nanos read_lag = shared.flows[f].read_lag;
      shared.flows[f] = FlowModel{};
      shared.flows[f].bps = bps < 1e18 ? bps : m.actual.flows[f].bps;
      shared.flows[f].read_lag = read_lag;
    }
    for (RankLink& l : shared.rank_links) {
      if (!(l.egress_bps > 0)) l.egress_bps = 1e18;
      if (!(l.ingress_bps > 0)) l.ingress_bps = 1e18;
    }
    shared.drop_measured_messages();
    const Nanos shared_base = m.mean(shared);
    d.compression_model = shared_base;
    if (d.measured > 0 && std::abs(static_cast<double>(shared_base - d.measured)) > 0.15 * static_cast<double>(d.measured)) {
      d.notes.push_back("the compression ranking's link model (each host's link at the capacity it reached, shared by its flows) "
                        "simulates " + std::to_string(shared_base / 1000000) + " ms per iteration against " +
                        std::to_string(d.measured / 1000000) + " ms measured: its savings are rough");
    }
    // One simulation per tensor and factor, in parallel.
    const std::size_t factors = o.compress_factors.size();
    for (Compression& c : d.compression) c.saving.assign(factors, 0);
    m.parallel("compression", d.compression.size() * factors, [&](std::size_t j) {
      Compression& c = d.compression[j / factors];
      const double k = o.compress_factors[j % factors];
      SimGraph g = shared;
      for (OpIndex op : groups.at(c.tensor)) {
        SimGraph::Node& node = g.ops[op];
        const double cost = o.compress_ns_per_byte * static_cast<double>(node.bytes);
        SimGraph::NodeExtra& x = g.extra_for(op);
        x.prep = static_cast<Nanos>(std::llround(cost / 2));
        x.post = static_cast<Nanos>(std::llround(cost / 2));
        node.bytes = static_cast<Bytes>(std::ceil(static_cast<double>(node.bytes) / k));
      }
      c.saving[j % factors] = shared_base - m.mean(g);
    });
    const std::size_t key = o.compress_factors.size() > 1 ? 1 : 0;
    std::stable_sort(d.compression.begin(), d.compression.end(), [key](const Compression& a, const Compression& b) {
      const Nanos sa = key < a.saving.size() ? a.saving[key] : 0, sb = key < b.saving.size() ? b.saving[key] : 0;
      return sa > sb;
    });
  }

  // The order hint: the job as measured, every send at its urgency.
  if (std::any_of(p.ops.begin(), p.ops.end(), [](const Op& op) { return op.type == OpType::send; })) {
    try {
      OrderHint& h = d.order;
      h.priorities = urgency_priorities(p, m.actual.flows);
      SimGraph g = m.actual;
      // The measured messages keep their times: only which one a flow takes
      // first changes (the agents' credit keeps the kernel's queue short, so
      // that order is what the priorities decide).
      for (OpIndex o2 = 0; o2 < p.ops.size(); ++o2) {
        if (p.ops[o2].type != OpType::send) continue;
        g.ops[o2].priority = h.priorities[o2];
        h.changed += h.priorities[o2] != p.ops[o2].priority;
      }
      h.before = d.simulated;
      h.after = m.mean(g);
      h.tried = true;
    } catch (const std::invalid_argument&) {
      d.order = {};
    }
  }
  return d;
}

}  // namespace tw

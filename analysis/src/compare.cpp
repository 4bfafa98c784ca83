#include "tensorwire/analysis/compare.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tensorwire/core/text_table.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

ErrorStats error_stats(std::vector<double> e) {
  ErrorStats s;
  s.n = e.size();
  if (e.empty()) return s;
  double sum = 0;
  for (double x : e) {
    sum += x;
    s.max_abs = std::max(s.max_abs, std::abs(x));
  }
  s.mean = sum / static_cast<double>(e.size());
  std::sort(e.begin(), e.end());
  // Nearest rank.
  const auto q = [&e](double f) {
    const auto k = static_cast<std::size_t>(std::ceil(f * static_cast<double>(e.size())));
    return e[std::min(e.size() - 1, k == 0 ? 0 : k - 1)];
  };
  s.p50 = q(0.50);
  s.p95 = q(0.95);
  s.p99 = q(0.99);
  return s;
}

namespace {

double pct(double replay, double reference) { return (replay - reference) / reference * 100.0; }

}  // namespace

Comparison compare_timelines(const Profile& p, const Timeline& ref, const Timeline& rep) {
  Comparison c;
  c.reference_source = ref.source;
  c.replay_source = rep.source;
  const std::size_t n = std::min(ref.iterations, rep.iterations);
  c.iterations = n;
  std::vector<double> it_err;
  for (std::size_t i = 0; i < n; ++i) {
    c.reference_iteration.push_back(ref.iteration[i]);
    c.replay_iteration.push_back(rep.iteration[i]);
    if (ref.iteration[i] > 0 && rep.iteration[i] >= 0) it_err.push_back(pct(static_cast<double>(rep.iteration[i]), static_cast<double>(ref.iteration[i])));
  }
  c.iteration_pct = error_stats(it_err);
  if (!ref.rank_iteration.empty() && !rep.rank_iteration.empty()) {
    for (std::size_t r = 0; r < std::min(ref.rank_iteration.size(), rep.rank_iteration.size()); ++r) {
      std::vector<double> e;
      for (std::size_t i = 0; i < n; ++i) {
        const Nanos a = ref.rank_iteration[r][i], b = rep.rank_iteration[r][i];
        if (a > 0 && b >= 0) e.push_back(pct(static_cast<double>(b), static_cast<double>(a)));
      }
      c.rank_iteration_pct.push_back(error_stats(std::move(e)));
    }
  }
  if (!ref.ops.empty() && !rep.ops.empty()) {
    std::vector<double> completion, offset;
    for (std::size_t op = 0; op < p.ops.size(); ++op) {
      for (std::size_t i = 0; i < n; ++i) {
        const Instance& a = ref.ops[op][i];
        const Instance& b = rep.ops[op][i];
        if (a.start != -1 && b.start != -1) offset.push_back(static_cast<double>(b.start - a.start));
        if (p.ops[op].type != OpType::send || a.start == -1 || a.end == -1 || b.start == -1 || b.end == -1) continue;
        const Nanos da = a.end - a.start, db = b.end - b.start;
        if (da <= 0) continue;
        completion.push_back(pct(static_cast<double>(db), static_cast<double>(da)));
        c.worst_messages.push_back({static_cast<OpIndex>(op), static_cast<std::uint32_t>(i), da, db, completion.back()});
      }
    }
    c.completion_pct = error_stats(std::move(completion));
    c.start_offset_ns = error_stats(std::move(offset));
    std::sort(c.worst_messages.begin(), c.worst_messages.end(), [](const MessageError& x, const MessageError& y) {
      return std::llabs(x.replay - x.reference) > std::llabs(y.replay - y.reference);
    });
    if (c.worst_messages.size() > 10) c.worst_messages.resize(10);
    // Dependency edges within an iteration: how long `to` started after `from` ended.
    for (std::size_t op = 0; op < p.ops.size(); ++op) {
      for (const Dependency& d : p.ops[op].after) {
        if (d.iterations_back != 0) continue;
        std::vector<Nanos> sa, sb;
        for (std::size_t i = 0; i < n; ++i) {
          const Instance &fa = ref.ops[d.op][i], &ta = ref.ops[op][i], &fb = rep.ops[d.op][i], &tb = rep.ops[op][i];
          if (fa.end == -1 || ta.start == -1 || fb.end == -1 || tb.start == -1) continue;
          sa.push_back(ta.start - fa.end);
          sb.push_back(tb.start - fb.end);
        }
        if (sa.empty()) continue;
        const Nanos ma = percentile(sa, 0.5), mb = percentile(sb, 0.5);
        c.drifted_edges.push_back({d.op, static_cast<OpIndex>(op), ma, mb, mb - ma});
      }
    }
    std::sort(c.drifted_edges.begin(), c.drifted_edges.end(),
              [](const EdgeDrift& x, const EdgeDrift& y) { return std::llabs(x.drift) > std::llabs(y.drift); });
    if (c.drifted_edges.size() > 10) c.drifted_edges.resize(10);
  }
  std::vector<double> flow_err;
  for (std::size_t f = 0; f < p.flows.size(); ++f) {
    const double a = flow_rate_bps(ref, static_cast<FlowIndex>(f)), b = flow_rate_bps(rep, static_cast<FlowIndex>(f));
    if (a <= 0 || b <= 0) continue;
    c.flows.push_back({static_cast<FlowIndex>(f), a, b, pct(b, a)});
    flow_err.push_back(c.flows.back().error_pct);
  }
  c.flow_rate_pct = error_stats(std::move(flow_err));
  std::sort(c.flows.begin(), c.flows.end(), [](const FlowError& x, const FlowError& y) { return std::abs(x.error_pct) > std::abs(y.error_pct); });
  return c;
}

namespace {

nlohmann::json stats_json(const ErrorStats& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}, {"p99", s.p99}, {"max_abs", s.max_abs}};
}

std::string signed_pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", v);
  return b;
}

std::string signed_ns(double v) {
  const Nanos x = static_cast<Nanos>(std::llround(v));
  return (x < 0 ? "-" : "+") + human_duration(x < 0 ? -x : x);
}

}  // namespace

nlohmann::json comparison_json(const Profile& p, const Comparison& c) {
  nlohmann::json j;
  j["reference"] = c.reference_source;
  j["replay"] = c.replay_source;
  j["iterations"] = c.iterations;
  j["reference_iteration_ns"] = c.reference_iteration;
  j["replay_iteration_ns"] = c.replay_iteration;
  j["iteration_error_pct"] = stats_json(c.iteration_pct);
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& s : c.rank_iteration_pct) ranks.push_back(stats_json(s));
  j["rank_iteration_error_pct"] = std::move(ranks);
  j["message_completion_error_pct"] = stats_json(c.completion_pct);
  j["start_offset_error_ns"] = stats_json(c.start_offset_ns);
  j["flow_rate_error_pct"] = stats_json(c.flow_rate_pct);
  nlohmann::json worst = nlohmann::json::array();
  for (const auto& m : c.worst_messages) {
    worst.push_back({{"op", p.ops[m.op].id}, {"iteration", m.iteration}, {"reference_ns", m.reference}, {"replay_ns", m.replay},
                     {"error_pct", m.error_pct}});
  }
  j["worst_messages"] = std::move(worst);
  nlohmann::json flows = nlohmann::json::array();
  for (const auto& f : c.flows) {
    flows.push_back({{"flow", p.flows[f.flow].id}, {"reference_bps", f.reference_bps}, {"replay_bps", f.replay_bps}, {"error_pct", f.error_pct}});
  }
  j["flows"] = std::move(flows);
  nlohmann::json edges = nlohmann::json::array();
  for (const auto& e : c.drifted_edges) {
    edges.push_back({{"from", p.ops[e.from].id}, {"to", p.ops[e.to].id}, {"reference_slack_ns", e.reference_slack},
                     {"replay_slack_ns", e.replay_slack}, {"drift_ns", e.drift}});
  }
  j["drifted_edges"] = std::move(edges);
  if (c.lower_bound_ns >= 0) j["lower_bound"] = {{"iteration_ns", c.lower_bound_ns}, {"basis", c.lower_bound_basis}};
  return j;
}

std::string comparison_text(const Profile& p, const Comparison& c) {
  std::string out = "replay: " + c.replay_source + "\nreference: " + c.reference_source + " (" + std::to_string(c.iterations) +
                    " iterations compared)\n";
  std::vector<Nanos> ref_times, rep_times;
  for (std::size_t i = 0; i < c.iterations; ++i) {
    if (c.reference_iteration[i] > 0 && c.replay_iteration[i] >= 0) {
      ref_times.push_back(c.reference_iteration[i]);
      rep_times.push_back(c.replay_iteration[i]);
    }
  }
  if (!rep_times.empty()) {
    out += "median iteration time: replay " + human_duration(percentile(rep_times, 0.5)) + ", reference " +
           human_duration(percentile(ref_times, 0.5)) + "; median error " + signed_pct(c.iteration_pct.p50) + "\n";
  }
  if (c.lower_bound_ns >= 0) {
    out += "lower bound: " + human_duration(c.lower_bound_ns) + " per iteration (" + c.lower_bound_basis + ")";
    if (!rep_times.empty()) out += "; the fastest replayed iteration took " + human_duration(percentile(rep_times, 0));
    out += "\n";
  }
  out += "\n";
  TextTable t({"error (replay - reference)", "n", "mean", "p50", "p95", "p99", "max |e|"});
  const auto add_pct = [&t](const std::string& what, const ErrorStats& s) {
    if (s.n == 0) return;
    t.add({what, std::to_string(s.n), signed_pct(s.mean), signed_pct(s.p50), signed_pct(s.p95), signed_pct(s.p99),
           signed_pct(s.max_abs).substr(1)});
  };
  add_pct("iteration time (job-wide)", c.iteration_pct);
  for (std::size_t r = 0; r < c.rank_iteration_pct.size(); ++r) add_pct("iteration time, rank " + std::to_string(r), c.rank_iteration_pct[r]);
  add_pct("message completion time", c.completion_pct);
  if (c.start_offset_ns.n > 0) {
    const ErrorStats& s = c.start_offset_ns;
    t.add({"op start within iteration", std::to_string(s.n), signed_ns(s.mean), signed_ns(s.p50), signed_ns(s.p95), signed_ns(s.p99),
           human_duration(static_cast<Nanos>(s.max_abs))});
  }
  add_pct("flow rate", c.flow_rate_pct);
  out += t.str();
  if (!c.worst_messages.empty()) {
    TextTable w({"worst messages", "iteration", "reference", "replay", "error"});
    for (const auto& m : c.worst_messages) {
      w.add({p.ops[m.op].id, std::to_string(m.iteration), human_duration(m.reference), human_duration(m.replay), signed_pct(m.error_pct)});
    }
    out += "\n" + w.str();
  }
  if (!c.flows.empty()) {
    TextTable f({"flows (worst first)", "reference", "replay", "error"});
    for (std::size_t i = 0; i < std::min<std::size_t>(c.flows.size(), 10); ++i) {
      const auto& x = c.flows[i];
      f.add({p.flows[x.flow].id, human_rate(x.reference_bps), human_rate(x.replay_bps), signed_pct(x.error_pct)});
    }
    out += "\n" + f.str();
  }
  if (!c.drifted_edges.empty()) {
    TextTable e({"dependency edges that drifted most", "slack (reference)", "slack (replay)", "drift"});
    for (const auto& x : c.drifted_edges) {
      e.add({p.ops[x.from].id + " -> " + p.ops[x.to].id, signed_ns(static_cast<double>(x.reference_slack)),
             signed_ns(static_cast<double>(x.replay_slack)),
             signed_ns(static_cast<double>(x.drift))});
    }
    out += "\n" + e.str();
  }
  return out;
}

}  // namespace tw

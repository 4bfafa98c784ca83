// The diagnosis for people (diagnosis_text) and for programs and the report
// (diagnosis_json; docs/analysis.md lists its fields).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tensorwire/analysis/diagnosis.hpp"
#include "tensorwire/core/text_table.hpp"

namespace tw {
namespace {

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", v * 100);
  return b;
}
std::string share(Nanos part, Nanos whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return b;
}
std::string fixed(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
std::string signed_time(Nanos v) { return (v > 0 ? "+" : v < 0 ? "-" : "") + human_duration(v < 0 ? -v : v); }
std::string impact(Nanos v, Nanos base) {
  return signed_time(v) + " (" + pct(base > 0 ? static_cast<double>(v) / static_cast<double>(base) : 0) + ")";
}
std::string op_name(const Profile& p, OpIndex op) {
  const Op& o = p.ops[op];
  std::string s = o.id;
  if (!o.tensor.empty()) s += " [" + o.tensor + "]";
  else if (!o.label.empty()) s += " [" + o.label + "]";
  return s;
}

// The median rate the other pairs achieved.
double peers_achieved(const Diagnosis& d, const SlowLink& l) {
  std::vector<double> v;
  for (const SlowLink& x : d.links) {
    if (&x != &l && x.achieved_bps > 0) v.push_back(x.achieved_bps);
  }
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::string diagnosis_text(const Diagnosis& d, const Profile& p) {
  std::string out = "analysis of " + d.source + ": " + std::to_string(d.iterations) + " iteration(s)\n";
  out += "iteration time: measured " + human_duration(d.measured) + "; the job as measured, simulated " + human_duration(d.simulated) +
         " (" + pct(d.sim_error) + (d.reproduces ? ", reproduces it" : ", does NOT reproduce it") + "); ideal " +
         human_duration(d.ideal) + " (every rank and link at its peers' median)\n";
  const auto thr = static_cast<Nanos>(d.threshold * static_cast<double>(d.ideal));
  out += "\nstragglers (named when putting a rank back costs at least " + fixed(d.threshold * 100, 0) + "% of the ideal, " +
         human_duration(thr) + "):\n";
  TextTable st({"rank", "host", "score", "compute/iter", "peers' median", "others waited on it", "impact", "without it"});
  for (const Straggler& s : d.stragglers) {
    st.add({std::to_string(s.rank) + (s.named ? " *" : ""), s.host, fixed(s.score, 2), human_duration(s.compute),
            human_duration(s.peers_compute), human_duration(s.waited_on), impact(s.impact, d.ideal), impact(s.without, d.simulated)});
  }
  out += st.str(2);
  bool any = false;
  for (const Straggler& s : d.stragglers) {
    if (!s.named) continue;
    any = true;
    out += "  -> rank " + std::to_string(s.rank) + " (" + s.host + ") is a straggler: its compute takes " + human_duration(s.compute) +
           " per iteration against its peers' " + human_duration(s.peers_compute) + "; without it the job would take " +
           human_duration(d.simulated - s.without) + " per iteration, " + impact(-s.without, d.simulated) + "\n";
  }
  if (!any) out += "  no straggler above the threshold\n";

  out += "\nlinks (host pairs; named when putting a pair back costs at least " + fixed(d.threshold * 100, 0) + "% of the ideal):\n";
  TextTable lt({"pair", "flows", "rate", "others'", "achieved", "per message", "latency", "retrans", "rwnd-limited", "impact", "without it"});
  for (const SlowLink& l : d.links) {
    const bool ev = l.evidence.known;
    lt.add({l.a + " - " + l.b + (l.named ? " *" : ""), std::to_string(l.flows.size()), human_rate(l.rate_bps),
            l.peers_bps > 0 ? human_rate(l.peers_bps) : "-", l.achieved_bps > 0 ? human_rate(l.achieved_bps) : "-",
            human_duration(l.per_message), human_duration(l.latency), ev ? std::to_string(l.evidence.retransmits) : "-",
            ev && l.evidence.rwnd_limited >= 0 ? fixed(l.evidence.rwnd_limited * 100, 0) + "%" : "-", impact(l.impact, d.ideal),
            impact(l.without, d.simulated)});
  }
  out += lt.str(2);
  any = false;
  for (const SlowLink& l : d.links) {
    if (!l.named) continue;
    any = true;
    out += "  -> the link " + l.a + " - " + l.b + " is slow: " + human_rate(l.achieved_bps > 0 ? l.achieved_bps : l.rate_bps) +
           " achieved against " + human_rate(l.achieved_bps > 0 ? peers_achieved(d, l) : l.peers_bps) +
           " on the other pairs; at their rate the job would take " + human_duration(d.simulated - l.without) + " per iteration, " +
           impact(-l.without, d.simulated) + "\n";
  }
  if (!any) out += "  no slow link above the threshold\n";

  const CriticalPath& c = d.path;
  out += "\ncritical path: " + human_duration(c.length) + " per iteration: compute " + share(c.compute, c.length) + ", network " +
         share(c.network, c.length);
  if (c.split) out += " (in the stack " + share(c.in_stack, c.length) + ", on the wire " + share(c.on_wire, c.length) + ")";
  out += ", receipt " + share(c.receipt, c.length) + ", gaps " + share(c.gap, c.length) + "\n";
  TextTable pt({"op", "rank", "kind", "on the path"});
  for (const PathOp& x : c.top) pt.add({op_name(p, x.op), std::to_string(p.ops[x.op].rank), x.kind, human_duration(x.time)});
  out += pt.str(2);

  const Verdict& v = d.verdict;
  out += "\nverdict: " + v.bound + "-bound: compute is " + fixed(v.compute_share * 100, 0) + "% of the critical path, communication " +
         fixed(v.communication_share * 100, 0) + "% (" + std::to_string(v.iterations_compute) + " iteration(s) compute-bound, " +
         std::to_string(v.iterations_communication) + " communication-bound)\n";
  out += "  with messages taking no time the job would take " + human_duration(v.no_network) + " " +
         impact(v.no_network - d.simulated, d.simulated) + "; with compute taking no time " + human_duration(v.no_compute) + " " +
         impact(v.no_compute - d.simulated, d.simulated) + "\n";

  out += "\ncompression (cost " + fixed(d.compress_ns_per_byte, 2) + " ns per byte; saving per iteration, top first):\n";
  std::vector<std::string> head{"tensor", "bytes/iter", "messages"};
  for (double k : d.factors) head.push_back(fixed(k, 0) + "x");
  TextTable ct(head);
  for (const Compression& x : d.compression) {
    std::vector<std::string> row{x.tensor, human_bytes(x.bytes), std::to_string(x.messages)};
    for (Nanos s : x.saving) row.push_back(impact(-s, d.simulated));
    ct.add(std::move(row));
  }
  out += ct.str(2);
  if (d.order.tried) {
    const OrderHint& h = d.order;
    out += "\norder hint: sends by urgency (critical path first; P3's layer order where the forward waits per layer): " +
           human_duration(h.after) + " per iteration against " + human_duration(h.before) + " " + impact(h.after - h.before, h.before) +
           ", " + std::to_string(h.changed) + " send(s) given another priority\n";
  }
  for (const std::string& n : d.notes) out += "note: " + n + "\n";
  return out;
}

nlohmann::json diagnosis_json(const Diagnosis& d, const Profile& p) {
  using nlohmann::json;
  json j;
  j["source"] = d.source;
  j["iterations"] = d.iterations;
  j["measured_ns"] = d.measured;
  j["simulated_ns"] = d.simulated;
  j["sim_error"] = d.sim_error;
  j["reproduces"] = d.reproduces;
  j["ideal_ns"] = d.ideal;
  j["threshold"] = d.threshold;
  json flows = json::array();
  for (std::size_t f = 0; f < d.flows.size(); ++f) {
    const FlowFit& x = d.flows[f];
    flows.push_back({{"flow", p.flows[f].id}, {"bps", x.bps}, {"per_message_ns", x.per_message}, {"latency_ns", x.latency},
                     {"path_bps", x.path_bps}, {"messages", x.messages}, {"fitted", x.fitted}});
  }
  j["flows"] = flows;
  json st = json::array();
  for (const Straggler& s : d.stragglers) {
    st.push_back({{"rank", s.rank}, {"host", s.host}, {"score", s.score}, {"compute_ns", s.compute}, {"peers_compute_ns", s.peers_compute},
                  {"waited_on_ns", s.waited_on}, {"impact_ns", s.impact}, {"without_ns", s.without}, {"named", s.named}});
  }
  j["stragglers"] = st;
  json links = json::array();
  for (const SlowLink& l : d.links) {
    json fl = json::array();
    for (FlowIndex f : l.flows) fl.push_back(p.flows[f].id);
    json x{{"a", l.a}, {"b", l.b}, {"flows", fl}, {"rate_bps", l.rate_bps}, {"achieved_bps", l.achieved_bps}, {"peers_bps", l.peers_bps},
           {"per_message_ns", l.per_message}, {"peers_per_message_ns", l.peers_per_message}, {"latency_ns", l.latency},
           {"peers_latency_ns", l.peers_latency}, {"impact_ns", l.impact}, {"without_ns", l.without}, {"named", l.named}};
    if (l.evidence.known) {
      x["evidence"] = {{"in_stack_ns", l.evidence.in_stack}, {"retransmits", l.evidence.retransmits}, {"rwnd_limited", l.evidence.rwnd_limited},
                       {"sndbuf_limited", l.evidence.sndbuf_limited}, {"cwnd", l.evidence.cwnd}, {"rtt_ns", l.evidence.rtt}};
    }
    links.push_back(std::move(x));
  }
  j["links"] = links;
  const CriticalPath& c = d.path;
  json top = json::array();
  for (const PathOp& x : c.top) top.push_back({{"op", p.ops[x.op].id}, {"rank", p.ops[x.op].rank}, {"kind", x.kind}, {"ns", x.time}});
  j["critical_path"] = {{"length_ns", c.length}, {"compute_ns", c.compute}, {"network_ns", c.network}, {"receipt_ns", c.receipt},
                        {"gap_ns", c.gap}, {"split", c.split}, {"in_stack_ns", c.in_stack}, {"on_wire_ns", c.on_wire},
                        {"rank_compute_ns", c.rank_compute}, {"top", top}};
  const Verdict& v = d.verdict;
  j["verdict"] = {{"bound", v.bound}, {"compute_share", v.compute_share}, {"communication_share", v.communication_share},
                  {"iterations_compute", v.iterations_compute}, {"iterations_communication", v.iterations_communication},
                  {"no_network_ns", v.no_network}, {"no_compute_ns", v.no_compute}};
  json comp = json::array();
  for (const Compression& x : d.compression) {
    comp.push_back({{"tensor", x.tensor}, {"bytes", x.bytes}, {"messages", x.messages}, {"saving_ns", x.saving}});
  }
  j["compression"] = {{"ns_per_byte", d.compress_ns_per_byte}, {"factors", d.factors}, {"model_ns", d.compression_model}, {"tensors", comp}};
  if (d.order.tried) {
    j["order"] = {{"before_ns", d.order.before}, {"after_ns", d.order.after}, {"predicted_saving_ns", d.order.before - d.order.after},
                  {"changed", d.order.changed}};
  } else {
    j["order"] = nullptr;
  }
  j["notes"] = d.notes;
  return j;
}

}  // namespace tw

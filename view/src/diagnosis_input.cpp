#include "tensorwire/view/diagnosis_input.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/analysis/sources.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/profile/build.hpp"
#include "tensorwire/view/sources.hpp"

namespace tw::view {
namespace {

// Each rank's host from its rank-R.json; where every agent reported the same
// host name (namespaces of one machine), its address as the controller saw it.
std::vector<std::string> run_hosts(const std::string& dir, std::size_t ranks) {
  std::vector<std::string> host(ranks), peer(ranks);
  {
    const nlohmann::json j = run_dir::read_run(dir);
    if (j.is_object() && j.contains("agents") && j["agents"].is_array()) {
      for (const auto& a : j["agents"]) {
        if (!a.is_object() || !a.contains("rank") || !a["rank"].is_number_unsigned()) continue;
        const auto r = a["rank"].get<std::uint64_t>();
        if (r >= ranks) continue;
        if (a.contains("host") && a["host"].is_string()) host[r] = a["host"].get<std::string>();
        if (a.contains("peer") && a["peer"].is_string()) {
          std::string p = a["peer"].get<std::string>();
          const auto colon = p.rfind(':');
          peer[r] = colon == std::string::npos ? p : p.substr(0, colon);
        }
      }
    }
  }
  for (std::size_t r = 0; r < ranks; ++r) {
    if (!host[r].empty()) continue;
    if (!std::filesystem::exists(run_dir::summary_file(dir, static_cast<RankId>(r)))) continue;
    const nlohmann::json j = run_dir::read_summary(dir, static_cast<RankId>(r));
    if (j.contains("host") && j["host"].is_string()) host[r] = j["host"].get<std::string>();
  }
  const std::set<std::string> hosts(host.begin(), host.end()), peers(peer.begin(), peer.end());
  if (ranks > 1 && hosts.size() == 1 && peers.size() > 1 && !peers.count("")) return peer;
  return host;
}

}  // namespace

std::vector<FlowEvidence> flow_evidence(const Profile& p, const std::vector<std::vector<Record>>& ranks) {
  const std::size_t nf = p.flows.size();
  std::vector<FlowEvidence> ev(nf);
  std::map<std::pair<std::uint32_t, std::uint32_t>, Nanos> sent_app, ready, delivered;  // by (op, iteration)
  std::vector<double> stack_sum(nf, 0), total_sum(nf, 0);
  std::vector<std::vector<Nanos>> stack(nf), rtt(nf);
  std::vector<std::vector<Nanos>> cwnd(nf);
  struct Span {
    bool any = false;
    TcpInfoRecord first{}, last{};
  };
  std::vector<Span> info(nf);
  for (const auto& recs : ranks) {
    for (const Record& r : recs) {
      if (r.is(RecordKind::send)) {
        const auto s = r.as<SendRecord>();
        if (s.sent_app >= 0) sent_app[{s.op, s.iteration}] = s.sent_app;
        if (s.ready >= 0) ready[{s.op, s.iteration}] = s.ready;
      } else if (r.is(RecordKind::receive)) {
        const auto x = r.as<ReceiveRecord>();
        if (x.delivered >= 0) delivered[{x.op, x.iteration}] = x.delivered;
      }
    }
  }
  for (const auto& recs : ranks) {
    for (const Record& r : recs) {
      if (r.is(RecordKind::tx_timestamps)) {
        const auto x = r.as<TxTimestampsRecord>();
        if (x.flow >= nf || x.wire_last < 0) continue;
        const auto it = sent_app.find({x.op, x.iteration});
        if (it != sent_app.end() && x.wire_last >= it->second) stack[x.flow].push_back(x.wire_last - it->second);
        const auto rd = ready.find({x.op, x.iteration});
        const auto dl = delivered.find({x.op, x.iteration});
        if (rd != ready.end() && dl != delivered.end() && x.wire_last >= rd->second && dl->second >= x.wire_last) {
          stack_sum[x.flow] += static_cast<double>(x.wire_last - rd->second);
          total_sum[x.flow] += static_cast<double>(dl->second - rd->second);
        }
      } else if (r.is(RecordKind::tcp_info)) {
        const auto x = r.as<TcpInfoRecord>();
        if (x.flow >= nf) continue;
        Span& s = info[x.flow];
        if (!s.any || x.at < s.first.at) s.first = x;
        if (!s.any || x.at > s.last.at) s.last = x;
        s.any = true;
        cwnd[x.flow].push_back(x.snd_cwnd);
        if (x.rtt_ns > 0) rtt[x.flow].push_back(x.rtt_ns);
      }
    }
  }
  for (std::size_t f = 0; f < nf; ++f) {
    FlowEvidence& e = ev[f];
    if (!stack[f].empty()) e.in_stack = percentile(stack[f], 0.5), e.known = true;
    if (total_sum[f] > 0) e.stack_share = stack_sum[f] / total_sum[f];
    if (info[f].any) {
      e.known = true;
      const TcpInfoRecord& a = info[f].first;
      const TcpInfoRecord& b = info[f].last;
      e.retransmits = b.total_retrans >= a.total_retrans ? b.total_retrans - a.total_retrans : 0;
      const Nanos busy = b.busy_ns - a.busy_ns;
      if (busy > 0) {
        e.rwnd_limited = std::clamp(static_cast<double>(b.rwnd_limited_ns - a.rwnd_limited_ns) / static_cast<double>(busy), 0.0, 1.0);
        e.sndbuf_limited = std::clamp(static_cast<double>(b.sndbuf_limited_ns - a.sndbuf_limited_ns) / static_cast<double>(busy), 0.0, 1.0);
      }
      e.cwnd = static_cast<std::uint32_t>(percentile(cwnd[f], 0.5));
      if (!rtt[f].empty()) e.rtt = percentile(rtt[f], 0.5);
    }
  }
  return ev;
}

DiagnosisInput diagnosis_input(const std::vector<std::string>& paths, double link_bps) {
  if (paths.empty()) throw std::invalid_argument("nothing to analyse");
  const std::string kind = source_kind(paths[0]);
  for (const std::string& p : paths) {
    if (source_kind(p) != kind || (kind != "capture" && paths.size() > 1)) {
      throw std::invalid_argument(p + ": analyse one run, one profile, or one capture (a directory per host)");
    }
  }
  DiagnosisInput in;
  if (kind == "run") {
    LoadedRun run = load_run(paths[0]);
    in.profile = std::move(run.profile);
    in.measured = std::move(run.timeline);
    in.source = "run " + paths[0];
    // A failed run is analysed for what its records hold, and says so.
    if (const std::string why = run_failure(paths[0]); !why.empty()) {
      in.source += " (the run failed: " + why + ")";
    }
    in.hosts = run_hosts(paths[0], in.profile.ranks.size());
    in.evidence = flow_evidence(in.profile, load_run_records(paths[0], in.profile));
    return in;
  }
  if (kind == "capture") {
    BuiltProfile b = build_profile(read_captures(paths), BuildOptions{});
    in.profile = std::move(b.profile);
    in.source = "capture";
    for (const std::string& p : paths) in.source += " " + p;
  } else {
    in.profile = load_profile_or_throw(paths[0]);
    in.source = "profile " + paths[0];
  }
  for (const Rank& r : in.profile.ranks) in.hosts.push_back(r.host);
  if (in.profile.observed && !in.profile.observed->ops.empty()) {
    in.measured = timeline_from_observed(in.profile);
  } else {
    // A plan repeats itself: its first iterations say all there is, and
    // simulating all of a profile's (it may say 10 million) would take memory
    // in proportion to a number the file only states.
    std::string cut;
    if (in.profile.iterations > kPlanIterations) {
      cut = ", the first " + std::to_string(kPlanIterations) + " of its " + std::to_string(in.profile.iterations) + " iterations";
      in.profile.iterations = kPlanIterations;
    }
    SimOptions so;
    so.link_bps = link_bps;
    const SimResult sim = simulate(in.profile, so);
    in.measured = timeline_from_simulation(in.profile, sim, "simulated");
    in.source += " (no observed timings: its plan simulated at " + human_rate(link_bps) + cut + ")";
  }
  return in;
}

}  // namespace tw::view

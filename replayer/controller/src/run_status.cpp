#include "tensorwire/controller/run_status.hpp"

#include <cstdio>

namespace tw {

const char* state_name(RunState s) {
  switch (s) {
    case RunState::starting: return "starting";
    case RunState::joining: return "joining";
    case RunState::connecting: return "connecting";
    case RunState::syncing: return "syncing";
    case RunState::running: return "running";
    case RunState::collecting: return "collecting";
    case RunState::done: return "done";
    case RunState::stopping: return "stopping";
    case RunState::failed: return "failed";
  }
  return "?";
}

namespace {

nlohmann::json agents_json(const RunStatus& s, const RunProgress& p) {
  nlohmann::json agents = nlohmann::json::array();
  for (const AgentStatus& a : s.agents) {
    nlohmann::json j = {{"host", a.host}, {"peer", a.peer}, {"pid", a.pid}, {"connected", a.connected}, {"done", a.done}};
    if (a.rank) j["rank"] = *a.rank;
    if (a.rank) j["iterations_done"] = p.rank_done(*a.rank);
    if (!a.clock.empty()) {
      j["clock"] = {{"offset_ns", a.clock.points().back().second.offset},
                    {"bound_ns", a.clock.points().back().second.bound},
                    {"samples", a.clock.points().size()},
                    {"drift_ns", a.clock.drift()}};
    }
    if (!a.error.empty()) j["error"] = a.error;
    agents.push_back(std::move(j));
  }
  return agents;
}

}  // namespace

nlohmann::json run_brief_json(const RunStatus& s, const RunProgress& p) {
  return {{"id", s.id},       {"state", state_name(s.state)}, {"profile", s.profile},
          {"ranks", s.ranks}, {"iterations", p.iterations()}, {"iterations_done", p.done()}};
}

nlohmann::json run_status_json(const RunStatus& s, const RunProgress& p) {
  nlohmann::json j = run_brief_json(s, p);
  j["controller"] = s.controller;
  j["out_dir"] = s.out_dir;
  j["start_ns"] = s.start_ns;
  j["agents"] = agents_json(s, p);
  j["bytes_sent"] = p.total_bytes_sent();
  j["throughput_bps"] = p.bytes_per_second() * 8;
  if (p.done() > 0) {
    const auto& last = p.job_iterations().back();
    j["last_iteration_ns"] = last.second - last.first;
  }
  if (s.error) j["error"] = *s.error;
  return j;
}

nlohmann::json feed_progress_json(const RunProgress& p, const std::vector<Flow>& flows, const std::vector<std::uint64_t>& flow_bytes) {
  nlohmann::json j = {{"type", "progress"}, {"iterations_done", p.done()}, {"iterations", p.iterations()},
                      {"bytes_sent", p.total_bytes_sent()}, {"throughput_bps", p.bytes_per_second() * 8}};
  const auto& its = p.job_iterations();
  if (!its.empty()) {
    j["last_iteration_ns"] = its.back().second - its.back().first;
  }
  // The last iterations' times, numbered: a page that joins late or misses a
  // message fills its chart from them.
  nlohmann::json recent = nlohmann::json::array();
  for (std::size_t i = its.size() > kFeedRecent ? its.size() - kFeedRecent : 0; i < its.size(); ++i) {
    recent.push_back({i, its[i].second - its[i].first});
  }
  j["recent_iteration_ns"] = std::move(recent);
  nlohmann::json f = nlohmann::json::array();
  for (std::size_t i = 0; i < flows.size() && i < flow_bytes.size(); ++i) f.push_back({flows[i].src, flows[i].dst, flow_bytes[i]});
  j["flow_bytes"] = std::move(f);  // [src, dst, bytes sent so far] per flow
  return j;
}

std::string prometheus_label(const std::string& v) {
  std::string q = "\"";
  for (char c : v) {
    if (c == '\\' || c == '"') {
      q += '\\';
      q += c;
    } else if (c == '\n') {
      q += "\\n";
    } else {
      q += c;
    }
  }
  return q + "\"";
}

std::string metrics_text(const std::string& run_id, const std::vector<Flow>& flows, const std::vector<std::uint64_t>& flow_bytes,
                         const RunProgress& p, std::size_t agents_connected, const std::vector<AgentStatus>& agents) {
  std::string m;
  const auto line = [&m](const std::string& s) { m += s + "\n"; };
  const std::string run = "run=" + prometheus_label(run_id);
  // Names follow Prometheus' rules (promtool check metrics): a counter ends in
  // _total, nothing else does; seconds and bytes are the units.
  line("# HELP tensorwire_iterations_completed_total Iterations completed by every rank.");
  line("# TYPE tensorwire_iterations_completed_total counter");
  line("tensorwire_iterations_completed_total{" + run + "} " + std::to_string(p.done()));
  line("# HELP tensorwire_iterations_planned Iterations the run replays.");
  line("# TYPE tensorwire_iterations_planned gauge");
  line("tensorwire_iterations_planned{" + run + "} " + std::to_string(p.iterations()));
  const auto seconds = [](Nanos ns) {  // to the nanosecond: a clock bound is microseconds
    char b[32];
    std::snprintf(b, sizeof b, "%.9f", static_cast<double>(ns) / 1e9);
    return std::string(b);
  };
  line("# HELP tensorwire_iteration_seconds Duration of the last completed iteration, job-wide.");
  line("# TYPE tensorwire_iteration_seconds gauge");
  if (p.done() > 0) {
    const auto& last = p.job_iterations().back();
    line("tensorwire_iteration_seconds{" + run + "} " + seconds(last.second - last.first));
  }
  line("# HELP tensorwire_rank_iterations_completed_total Iterations each rank completed.");
  line("# TYPE tensorwire_rank_iterations_completed_total counter");
  for (std::size_t r = 0; r < p.ranks(); ++r) {
    line("tensorwire_rank_iterations_completed_total{" + run + ",rank=\"" + std::to_string(r) + "\"} " +
         std::to_string(p.rank_done(static_cast<RankId>(r))));
  }
  line("# HELP tensorwire_rank_iteration_seconds Duration of each rank's last completed iteration on it.");
  line("# TYPE tensorwire_rank_iteration_seconds gauge");
  for (std::size_t r = 0; r < p.ranks(); ++r) {
    const Nanos last = p.rank_last(static_cast<RankId>(r));
    if (last >= 0) line("tensorwire_rank_iteration_seconds{" + run + ",rank=\"" + std::to_string(r) + "\"} " + seconds(last));
  }
  line("# HELP tensorwire_flow_bytes_sent_total Bytes handed to the kernel per flow.");
  line("# TYPE tensorwire_flow_bytes_sent_total counter");
  for (std::size_t f = 0; f < flows.size(); ++f) {
    line("tensorwire_flow_bytes_sent_total{" + run + ",flow=" + prometheus_label(flows[f].id) + ",src=\"" +
         std::to_string(flows[f].src) + "\",dst=\"" + std::to_string(flows[f].dst) + "\"} " +
         std::to_string(f < flow_bytes.size() ? flow_bytes[f] : 0));
  }
  line("# HELP tensorwire_agents_connected Agents connected to the controller.");
  line("# TYPE tensorwire_agents_connected gauge");
  line("tensorwire_agents_connected{" + run + "} " + std::to_string(agents_connected));
  // Each agent's latest clock estimate: its offset from the controller's clock,
  // and the bound on that offset's error (every timing of its rank is this good).
  const auto clock = [&](const char* name, const char* help, auto value) {
    line(std::string("# HELP ") + name + " " + help);
    line(std::string("# TYPE ") + name + " gauge");
    for (const AgentStatus& a : agents) {
      if (!a.rank || a.clock.empty()) continue;
      line(std::string(name) + "{" + run + ",rank=\"" + std::to_string(*a.rank) + "\",host=" + prometheus_label(a.host) + "} " +
           seconds(value(a.clock.points().back().second)));
    }
  };
  clock("tensorwire_clock_offset_seconds", "Agent clock minus the controller's, latest estimate.",
        [](const ClockEstimate& e) { return e.offset; });
  clock("tensorwire_clock_bound_seconds", "Error bound of the latest clock offset estimate.",
        [](const ClockEstimate& e) { return e.bound; });
  return m;
}

}  // namespace tw

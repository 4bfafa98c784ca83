// What the controller reports of a run while it goes and at its end: the JSON of
// /api/runs, /api/runs/{id}, the feed's messages and run.json, and the Prometheus
// text of /metrics. Pure: built from plain values, any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/controller/clock_sync.hpp"
#include "tensorwire/controller/run_progress.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

// The phases of a run, in order; a failure goes through `stopping` to `failed`.
enum class RunState { starting, joining, connecting, syncing, running, collecting, done, stopping, failed };
const char* state_name(RunState s);

struct AgentStatus {
  std::optional<RankId> rank;
  std::string host, peer;
  long pid = 0;
  bool connected = false;
  bool done = false;
  ClockTrack clock;
  std::string error;
};

struct RunStatus {
  std::string id;
  RunState state = RunState::starting;
  std::string profile;  // its name
  std::size_t ranks = 0;
  std::string controller;  // HOST:PORT
  std::string out_dir;
  Nanos start_ns = 0;
  std::vector<AgentStatus> agents;  // those that said hello, in order of arrival
  std::optional<std::string> error;
};

// An entry of GET /api/runs.
nlohmann::json run_brief_json(const RunStatus& s, const RunProgress& p);
// GET /api/runs/{id}, the feed's `status`, and the base of run.json.
nlohmann::json run_status_json(const RunStatus& s, const RunProgress& p);
// The feed's `progress` message.
// A `progress` message of /api/feed: iterations done, bytes, the last
// kFeedRecent iterations' times ([index, ns]), and each flow's bytes sent so far
// ([src, dst, bytes]).
inline constexpr std::size_t kFeedRecent = 64;
nlohmann::json feed_progress_json(const RunProgress& p, const std::vector<Flow>& flows, const std::vector<std::uint64_t>& flow_bytes);
// GET /metrics. `flow_bytes` is indexed like `flows`; `agents` give the clock series.
std::string metrics_text(const std::string& run_id, const std::vector<Flow>& flows, const std::vector<std::uint64_t>& flow_bytes,
                         const RunProgress& p, std::size_t agents_connected, const std::vector<AgentStatus>& agents);
// A Prometheus label value, quoted: backslash, double quote and newline escaped.
std::string prometheus_label(const std::string& v);

}  // namespace tw

// The agent's side of the control link (`tensorwire agent --controller
// HOST:PORT`): an agent that is set up by a controller instead of by hand. It dials the controller, presents the run's
// token, says where it listens for data flows, receives its rank, the profile
// and the roster, answers clock-sync pings, starts at the instant it is given,
// streams its progress, and uploads its results at the end.
//
// It never outlives the controller: when the control connection closes or goes
// silent (heartbeats) the agent stops within seconds, as it does when its stdin
// closes if `watch_stdin` is set (agents started over ssh).
//
// Threads: the link runs its own io_context on the calling thread (WebSocket,
// signals, stdin, progress flushes) and the agent on a second thread; they meet
// through AgentLink (agent.hpp), whose calls the link posts or guards with a mutex.
#pragma once

#include <optional>
#include <string>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/protocol/control_messages.hpp"

namespace tw {

struct AgentClientOptions {
  std::string controller;  // HOST:PORT
  std::string token;
  std::optional<RankId> rank_hint;  // the rank the launcher meant for this agent
  std::string host_name;  // what the agent calls its host; empty: gethostname()
  std::string data_host;  // where to listen for data flows; empty: the address that reaches the controller
  std::string out_dir;  // keep results here too; empty: a temporary directory, removed after upload
  // TLS to the controller, trusting the certificates in this PEM file (a CA, or
  // the controller's self-signed certificate); empty: plain TCP.
  std::string controller_ca;
  Nanos join_timeout = 30 * kSecond;  // to reach the controller
  Nanos heartbeat = kHeartbeatTimeout;  // silence after which the controller is gone
  bool watch_stdin = false;
  bool quiet = false;
};

// Runs until the run ends; returns the process exit code (0: the run completed
// and the results were uploaded). Failures are reported to the controller and,
// in one line, on stderr.
int run_controlled_agent(const AgentClientOptions& options);

}  // namespace tw

// The controller of a run (`tensorwire run`): a Boost.Beast HTTP + WebSocket
// server that agents dial into. It checks each party's token, assigns ranks,
// hands out the profile and the roster, waits until every data connection is up,
// synchronises clocks, starts every agent at one instant, follows the run live
// (terminal progress, /api/runs, /api/feed, /metrics), detects agents that die,
// hang or disconnect, and collects every agent's results onto its own clock in
// the run directory. docs/protocol.md describes the messages.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/controller/clock_sync.hpp"
#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/protocol/run_settings.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

// Starts the agents of a run somewhere (local processes, ssh, namespaces) or, for
// agents started by something else, nothing at all.
class Launcher {
 public:
  virtual ~Launcher() = default;
  // Where the agents will run, for messages: "4 local processes".
  virtual std::string describe() const = 0;
  // Starts the agents; they dial `controller` (HOST:PORT) with `token`.
  virtual void launch(const std::string& controller, const std::string& token) = 0;
  // Launched agents that have ended since the last call: (rank hint, "host: why").
  virtual std::vector<std::pair<RankId, std::string>> ended() = 0;
  // Ends whatever still runs, waiting up to `grace` for a clean exit.
  virtual void stop(Nanos grace) = 0;
};

inline constexpr const char* kDashboardPath = "/dashboard";

struct ControllerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0: any free port
  std::string token;  // empty: a random one
  std::string run_id;
  std::string profile_name;  // for the API and run.json
  std::string out_dir;  // the run directory (created)
  RunSettings settings;
  std::vector<double> slowdown;  // per rank (empty: 1 for all)
  // Emulated one-way latency from rank src to rank dst (e.g. a testbed pair's).
  std::function<Nanos(RankId src, RankId dst)> pair_delay;
  double time_scale = 1;  // recorded in run.json: the profile was stretched by this
  Nanos join_timeout = 30 * kSecond;  // for every agent to dial in
  Nanos heartbeat = kHeartbeatTimeout;  // silence after which an agent is gone (heartbeat_for)
  Nanos collect_timeout = 120 * kSecond;  // for results after the last iteration
  // For every agent to finish its iterations; nullopt: no limit (heartbeats and
  // the agents' own idle timeout still end a run that hangs).
  std::optional<Nanos> run_timeout;
  Nanos start_lead = 300 * kMilli;  // the common start is this far after clock sync
  int sync_samples = 16;
  Nanos resync_every = 5 * kSecond;
  bool quiet = false;
  bool dashboard = false;  // serve the live dashboard's page at kDashboardPath
  // TLS on the control plane (HTTPS and WSS only) with this certificate chain
  // and private key (PEM files); both empty: plain TCP.
  std::string tls_cert, tls_key;
  // Called once the server listens, with its HOST:PORT and the token (for
  // agents started by something else).
  std::function<void(const std::string& address, const std::string& token)> on_listening;
};

struct AgentInfo {
  RankId rank = 0;
  std::string host;  // as the agent named itself
  std::string peer;  // address:port it dialled from
  long pid = 0;
  ClockTrack clock;
  bool finished = false;  // all iterations, no error
  bool uploaded = false;
  std::string error;
};

struct RunOutcome {
  bool ok = false;
  bool interrupted = false;
  std::string error;  // one line naming the rank and host, when not ok
  std::string out_dir;
  std::vector<AgentInfo> agents;  // by rank
  std::vector<std::pair<Nanos, Nanos>> iterations;  // job-wide, controller clock
  std::uint64_t bytes_sent = 0;
  Nanos setup_ns = 0;    // launch to the common start
  // Where set-up went: cutting each rank's slice of the profile (prepare), then
  // to every agent launched and dialled in (join), then to every agent's flows
  // connected (connect, which includes sending the set-ups), then to every clock
  // synchronised (sync); the rest of setup_ns is the start lead.
  struct SetupPhases {
    Nanos prepare = 0;
    Nanos join = 0;
    Nanos connect = 0;
    Nanos sync = 0;
  } setup_phases;
  Nanos collect_ns = 0;  // last iteration to all results written
};

// Runs one run to its end. `profile` is what is replayed (its observed timings
// stay here; agents get the profile without them). Throws std::runtime_error
// only if the server cannot start; everything after that ends in the outcome.
RunOutcome run_controller(const Profile& profile, const ControllerOptions& options, Launcher& launcher);

// The set-up's phases in ns: {"prepare", "join", "connect", "sync", "start_lead"}, which add
// up to setup_ns (run.json's setup_phases_ns); those not reached are 0.
nlohmann::json setup_phases_json(const RunOutcome& o);

}  // namespace tw

// `tensorwire agent` and `tensorwire replay --local`.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "command.hpp"
#include "replay_options.hpp"
#include "tensorwire/util/parallel.hpp"
#include "tensorwire/agent/agent.hpp"
#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/agent/control_link.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"
#include "tensorwire/core/text_table.hpp"
#include "tensorwire/launch/local_replay.hpp"
#include "tensorwire/launch/run_settings.hpp"
#include "tensorwire/util/self_exe.hpp"

namespace tw::cli {
namespace {

struct AgentArgs {
  std::optional<RankId> rank;
  std::string profile;
  std::string roster;
  std::string out;
  std::string token;
  int listen_fd = -1;
  Nanos start_at = 0;
  bool quiet = false;
  // Set up by a controller instead:
  std::string controller;
  bool token_stdin = false;
  std::optional<RankId> rank_hint;
  std::string data_host;
  std::string host_name;
  std::string controller_ca;
  double join_timeout_s = 30;
  double heartbeat_s = 0;  // 0: the protocol's
  std::uint32_t machine_agents = 0;  // by hand, for automatic I/O threads; 0: the roster's ranks on this host
  ReplayOptions replay;
};

// The token from stdin: one line, read byte by byte so that nothing after it is
// consumed (stdin then stays open: its end means the launcher went away).
std::string read_token_line() {
  std::string t;
  char c;
  while (::read(0, &c, 1) == 1 && c != '\n') {
    t += c;
    if (t.size() > 4096) throw std::invalid_argument("--token-stdin: no token line on stdin");
  }
  return t;
}

int run_controlled(const AgentArgs& a) {
  AgentClientOptions o;
  o.controller = a.controller;
  if (a.token_stdin) {
    o.token = read_token_line();
  } else if (!a.token.empty()) {
    o.token = a.token;
  } else if (const char* t = std::getenv("TW_TOKEN")) {
    o.token = t;
  }
  o.rank_hint = a.rank_hint;
  o.data_host = a.data_host;
  o.host_name = a.host_name;
  o.out_dir = a.out;
  o.controller_ca = a.controller_ca;
  o.join_timeout = seconds_option(a.join_timeout_s, "--join-timeout");
  if (a.heartbeat_s > 0) o.heartbeat = seconds_option(a.heartbeat_s, "--heartbeat");
  o.watch_stdin = a.token_stdin;
  o.quiet = a.quiet;
  return run_controlled_agent(o);
}

int run_agent_command(const AgentArgs& a) {
  if (!a.controller.empty()) {
    if (a.rank || !a.profile.empty() || !a.roster.empty()) {
      throw std::invalid_argument("--controller: the controller assigns the rank, profile and roster; drop --rank, --profile, --roster");
    }
    return run_controlled(a);
  }
  if (!a.rank || a.profile.empty() || a.roster.empty() || a.out.empty()) {
    throw std::invalid_argument("an agent needs --rank, --profile, --roster and --out (or --controller HOST:PORT)");
  }
  const Profile p = load_profile_or_throw(a.profile);
  AgentConfig c;
  c.rank = *a.rank;
  c.profile_path = std::filesystem::absolute(a.profile).string();
  c.roster = load_roster(a.roster);
  if (!a.token.empty()) c.roster.token = a.token;
  c.out_dir = a.out;
  // By hand, an agent is one of a run by itself: the run's settings, on this rank.
  const RunSettings s = make_run_settings(p, a.replay, {});
  c.executor = executor_options_for(s, a.replay.slowdown);
  c.spin = s.spin;
  c.read_gap = s.read_gap;
  c.read_nap = s.read_nap;
  c.delay = s.delay;
  c.connect_timeout = s.connect_timeout;
  c.idle_timeout = s.idle_timeout;
  c.listen_fd = UniqueFd(a.listen_fd);
  c.tx_timestamps = s.tx_timestamps;
  c.tx_stamp_every = s.tx_stamp_every;
  c.tx_sched = s.tx_sched;
  c.io_threads = s.io_threads;
  c.machine_agents = a.machine_agents;
  c.pin = s.pin;
  c.realtime = s.realtime;
  c.sched_batch = s.sched_batch;
  c.congestion_control = s.congestion_control;
  if (a.start_at > 0) c.start_at = a.start_at;
  c.quiet = a.quiet;
  run_agent(p, c);
  return 0;
}

struct LocalArgs {
  std::uint32_t local = 0;
  std::string profile;
  std::string out;
  std::vector<std::string> slow_ranks;
  double timeout_s = 600;
  bool json = false;
  ReplayOptions replay;
};

int run_local_command(const LocalArgs& a) {
  const Profile p = load_profile_or_throw(a.profile);
  if (a.local != p.ranks.size()) {
    throw std::invalid_argument("--local " + std::to_string(a.local) + ": the profile has " + std::to_string(p.ranks.size()) +
                                " ranks; run one agent per rank");
  }
  LocalReplayOptions o;
  o.exe = self_exe();
  o.profile_path = a.profile;
  o.out_dir = a.out;
  o.timeout = seconds_option(a.timeout_s, "--timeout");
  const ReplayOptions& r = a.replay;
  const RunPlacement where{.local_agents = a.local, .cores = usable_cores()};
  // Checked here, before any agent starts; the agents derive the same settings.
  const RunSettings settings = make_run_settings(p, r, where);
  o.agent_args = agent_arguments(r, where);
  o.slow_ranks = parse_slow_ranks(a.slow_ranks, p.ranks.size());

  const LocalReplayResult result = run_local_replay(p, o);

  // The timing model: the same profile simulated at --link-gbps.
  Profile model = p;
  if (r.iterations > 0) model.iterations = r.iterations;
  SimOptions so;
  so.link_bps = r.link_gbps * 1e9;
  so.executor = executor_options_for(settings, r.slowdown);
  for (const auto& [rank, f] : o.slow_ranks) {
    if (so.slowdown.empty()) so.slowdown.assign(p.ranks.size(), 1.0);
    so.slowdown[rank] = f;
  }
  const SimResult sim = simulate(model, so);

  std::vector<Nanos> times;
  for (const auto& [s, e] : result.iterations) times.push_back(e - s);
  const std::vector<Nanos> sim_times = sim.iteration_times();
  if (a.json) {
    nlohmann::json j;
    j["profile"] = a.profile;
    j["out"] = a.out;
    j["iteration_ns"] = times;
    j["model_iteration_ns"] = sim_times;
    j["model_link_bps"] = so.link_bps;
    j["messages"] = result.messages;
    j["bytes"] = result.bytes;
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  TextTable t({"iteration", "replayed", "model"});
  const std::size_t shown = std::min<std::size_t>(times.size(), 20);
  for (std::size_t i = 0; i < shown; ++i) {
    t.add({std::to_string(i), human_duration(times[i]), i < sim_times.size() ? human_duration(sim_times[i]) : "-"});
  }
  fmt::print("{}", t.str());
  if (times.size() > shown) fmt::print("  ... {} more iterations\n", times.size() - shown);
  fmt::print("\n{} iterations, median {} (timing model at {}: {}); {} messages, {} delivered\n", times.size(),
             human_duration(percentile(times, 0.5)), human_rate(so.link_bps), human_duration(percentile(sim_times, 0.5)), result.messages,
             human_bytes(result.bytes));
  fmt::print("results in {}\n", a.out);
  return 0;
}

}  // namespace

void add_agent_commands(CLI::App& app, Action& action) {
  auto agent = std::make_shared<AgentArgs>();
  CLI::App* s = app.add_subcommand("agent", "Run one replay agent: one rank of a profile, as real TCP traffic");
  s->footer(
      "Two ways to run an agent:\n"
      "  by hand:          tensorwire agent --rank R --profile P --roster ROSTER.yaml --out DIR\n"
      "  for a controller: tensorwire agent --controller HOST:PORT --token T   (or TW_TOKEN=T, or --token-stdin)\n"
      "With --controller the rank, profile, roster and replay options come from the controller\n"
      "(`tensorwire run`), and the agent exits when the controller goes away.");
  s->add_option("--rank", agent->rank, "The rank this agent plays");
  s->add_option("--profile", agent->profile, "Traffic profile (YAML)");
  s->add_option("--roster", agent->roster, "Roster file: where each rank's agent listens, and the run token");
  s->add_option("--out", agent->out, "Directory for the results (with --controller: also keep them here)");
  s->add_option("--token", agent->token, "Run token (overrides the roster's; with --controller: the controller's)");
  s->add_option("--controller", agent->controller, "HOST:PORT of a controller to take the run from");
  s->add_flag("--token-stdin", agent->token_stdin, "Read the token from the first line of stdin; exit when stdin closes");
  s->add_option("--controller-ca", agent->controller_ca,
                "TLS to the controller (a run with --tls-cert), trusting the certificates in this PEM file: its CA, or its "
                "self-signed certificate")
      ->check(CLI::ExistingFile);
  s->add_option("--rank-hint", agent->rank_hint, "The rank the launcher meant for this agent (with --controller)");
  s->add_option("--host-name", agent->host_name,
                 "What this agent calls its host in the controller's messages (default: the host name; a testbed gives its "
                 "namespace)");
  s->add_option("--data-host", agent->data_host,
                "Address to accept data flows on (default: the one that reaches the controller)");
  s->add_option("--join-timeout", agent->join_timeout_s, "Seconds to keep trying to reach the controller")->capture_default_str();
  s->add_option("--heartbeat", agent->heartbeat_s,
                "Seconds of silence after which the controller is taken for gone (default 1.8; a run that starts many "
                "agents per core on one machine passes a longer one)");
  s->add_option("--slowdown", agent->replay.slowdown, "Stretch this rank's compute by this factor (a straggler)")
      ->capture_default_str();
  s->add_option("--listen-fd", agent->listen_fd, "Use this inherited listening socket (set by replay --local)");
  s->add_option("--start-at", agent->start_at, "Begin iteration 0 at this CLOCK_REALTIME time, in ns");
  s->add_flag("--quiet", agent->quiet, "Print errors only");
  s->add_option("--machine-agents", agent->machine_agents,
                "By hand: how many agents share this machine's cores, for --io-threads auto (default: the roster's ranks "
                "on this rank's host; agents in network namespaces of one machine have hosts of their own)")
      ->check(CLI::Range(1U, 1U << 20));
  add_replay_options(s, agent->replay);
  s->callback([&action, agent] { action = [agent] { return run_agent_command(*agent); }; });

  auto local = std::make_shared<LocalArgs>();
  CLI::App* r = app.add_subcommand("replay", "Replay a profile with one agent per rank on this machine (loopback)");
  r->add_option("--local", local->local, "Number of local agents: one per rank of the profile")->required();
  r->add_option("profile", local->profile, "Traffic profile (YAML)")->required();
  r->add_option("--out", local->out, "Directory for the results")->required();
  r->add_option("--slow-rank", local->slow_ranks, "RANK:FACTOR: stretch one rank's compute (repeatable)");
  r->add_option("--timeout", local->timeout_s, "Seconds the whole replay may take")->capture_default_str();
  r->add_flag("--json", local->json, "Machine-readable output");
  add_replay_options(r, local->replay);
  r->callback([&action, local] { action = [local] { return run_local_command(*local); }; });
}

}  // namespace tw::cli

// `tensorwire run`: a replay driven by the controller, with agents launched
// locally, over ssh, or by something else.
#include <fmt/core.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "command.hpp"
#include "replay_options.hpp"
#include "tensorwire/util/parallel.hpp"
#include "tensorwire/analysis/compare_file.hpp"
#include "tensorwire/controller/controller.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/util/token.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/core/text_table.hpp"
#include "tensorwire/launch/launchers.hpp"
#include "tensorwire/launch/run_settings.hpp"
#include "tensorwire/launch/testbed_lease.hpp"
#include "tensorwire/launch/time_scale.hpp"
#include "tensorwire/util/self_exe.hpp"
#include "tensorwire/util/shell_quote.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw::cli {
namespace {

struct RunArgs {
  std::string profile;
  std::uint32_t local = 0;
  std::string hosts;
  std::uint32_t expect = 0;
  std::uint32_t testbed = 0;
  std::string testbed_name = "tw";
  std::string rate;
  std::vector<std::string> pairs;
  bool keep = false;
  double time_scale = 1;
  std::string listen;
  std::string token;
  std::string out;
  std::string agent_bin;
  std::string ssh_config;
  std::vector<std::string> slow_ranks;
  double join_timeout_s = 30;
  double timeout_s = 0;
  bool quiet = false;
  bool json = false;
  bool dashboard = false;
  std::string tls_cert, tls_key;
  ReplayOptions replay;
};

// The dashboard's address with the token in its fragment (which a browser never
// sends): printed on a terminal; otherwise (output to a log or a pipe) written to
// a file only its owner can read, removed when the run ends.
void announce_dashboard(const std::string& url, const std::string& file) {
  if (::isatty(STDERR_FILENO)) {
    fmt::print(stderr, "tensorwire run: dashboard at {}\n", url);
    return;
  }
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  write_private_file_atomic(file, url + "\n");
  fmt::print(stderr, "tensorwire run: dashboard at {} (with its token in {}, readable by you only)\n", url.substr(0, url.find('#')), file);
}

std::string make_run_id() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + random_token().substr(0, 4);
}

std::string signed_duration(Nanos ns) { return (ns < 0 ? "-" : "+") + human_duration(ns < 0 ? -ns : ns); }

int run_command(const RunArgs& a) {
  const int modes = (a.local > 0) + !a.hosts.empty() + (a.expect > 0) + (a.testbed > 0);
  if (modes != 1) {
    throw std::invalid_argument("say where the agents run: exactly one of --local N, --testbed N, --hosts LIST, --expect N");
  }
  if ((!a.rate.empty() || !a.pairs.empty() || a.keep) && a.testbed == 0) {
    throw std::invalid_argument("--rate, --pair and --keep shape a testbed: use them with --testbed N");
  }
  const TimeScale scale(a.time_scale);
  const Profile original = load_profile_or_throw(a.profile);
  // Time dilation: the agents replay a stretched profile; results are scaled back.
  const Profile p = scale.stretch(original);
  const std::size_t ranks = p.ranks.size();
  if ((a.local > 0 && a.local != ranks) || (a.expect > 0 && a.expect != ranks)) {
    throw std::invalid_argument(std::string(a.local ? "--local " : "--expect ") + std::to_string(a.local ? a.local : a.expect) +
                                ": the profile has " + std::to_string(ranks) + " ranks; run one agent per rank");
  }
  ControllerOptions o;
  o.run_id = make_run_id();
  o.profile_name = a.profile;
  o.out_dir = a.out.empty() ? "runs/" + o.run_id : a.out;
  o.token = a.token;
  if (o.token.empty()) {
    if (const char* t = std::getenv("TW_TOKEN"); t != nullptr) o.token = t;
  }
  o.quiet = a.quiet || a.json;
  if (a.timeout_s > 0) o.run_timeout = seconds_option(a.timeout_s, "--timeout");
  const std::size_t local_agents = agents_on_this_machine(a.local, a.testbed, ranks);
  const RunPlacement where{.scale = scale, .local_agents = local_agents, .cores = usable_cores()};
  // Agents that share this machine's cores start one after the other.
  o.join_timeout = seconds_option(a.join_timeout_s, "--join-timeout") * static_cast<Nanos>(crowding_factor(where));
  o.settings = make_run_settings(p, a.replay, where);
  o.heartbeat = heartbeat_for(where);
  o.time_scale = scale.factor();
  o.slowdown.assign(ranks, 1.0);
  for (const auto& [rank, f] : parse_slow_ranks(a.slow_ranks, ranks)) o.slowdown[rank] = f;

  const std::string log_dir = run_dir::logs_dir(o.out_dir);
  std::vector<std::string> agent_args = launched_agent_arguments(where);
  // TLS: the agents this run starts trust the controller's certificate (an ssh
  // host must have it at the same path).
  if (a.tls_cert.empty() != a.tls_key.empty()) throw std::invalid_argument("--tls-cert and --tls-key go together");
  std::string ca_arg;
  if (!a.tls_cert.empty()) {
    o.tls_cert = std::filesystem::absolute(a.tls_cert).string();
    o.tls_key = a.tls_key;
    agent_args.insert(agent_args.end(), {"--controller-ca", o.tls_cert});
    ca_arg = " --controller-ca " + shell_quote(o.tls_cert);
  }
  const std::string scheme = a.tls_cert.empty() ? "http" : "https";
  std::unique_ptr<Launcher> launcher;
  std::string token_file;  // --expect: where the agents' operator finds the token
  std::optional<TestbedLease> testbed;
  if (a.testbed > 0) {
    testbed.emplace(make_testbed_spec(a.testbed_name, a.testbed, a.rate, a.pairs), a.keep, self_exe());
    const TestbedSpec& spec = testbed->spec();
    o.listen = spec.bridge_address() + ":0";
    auto tl = std::make_unique<TestbedLauncher>(spec, ranks, self_exe(), log_dir, agent_args);
    const TestbedLauncher* placement = tl.get();
    o.pair_delay = [spec, placement, scale](RankId src, RankId dst) {
      return scale.stretch(static_cast<double>(spec.delay(placement->host_of(src), placement->host_of(dst))));
    };
    launcher = std::move(tl);
  } else if (a.local > 0) {
    o.listen = a.listen.empty() ? "127.0.0.1:0" : a.listen;
    launcher = std::make_unique<LocalLauncher>(self_exe(), ranks, log_dir, agent_args);
  } else if (!a.hosts.empty()) {
    const auto hosts = parse_host_list(a.hosts);
    const bool all_loopback = std::all_of(hosts.begin(), hosts.end(), [](const HostSlots& h) { return is_loopback_host(h.host); });
    if (a.listen.empty() && !all_loopback) {
      throw std::invalid_argument("--hosts: give --listen ADDR:PORT, an address of this machine the hosts can reach");
    }
    o.listen = a.listen.empty() ? "127.0.0.1:0" : a.listen;
    launcher = std::make_unique<SshLauncher>(hosts, ranks, a.agent_bin.empty() ? self_exe() : a.agent_bin, a.ssh_config,
                                             log_dir, agent_args);
  } else {
    if (a.listen.empty()) throw std::invalid_argument("--expect: give --listen ADDR:PORT for the agents to dial");
    o.listen = a.listen;
    launcher = std::make_unique<ExternalAgents>(ranks);
    // The token goes into a file only its owner can read, never onto the
    // terminal or a command line (`ps` shows every user the arguments).
    token_file = o.out_dir + "/token";
    o.on_listening = [&a, token_file, ca_arg](const std::string& address, const std::string& token) {
      std::filesystem::create_directories(std::filesystem::path(token_file).parent_path());
      write_private_file_atomic(token_file, token + "\n");
      fmt::print(stderr,
                 "tensorwire run: waiting for {} agents; the run's token is in {} (readable by you only); copy it to each agent's "
                 "host and start\n  TW_TOKEN=$(cat TOKEN_FILE) tensorwire agent --controller {}{}\n",
                 a.expect, token_file, address, ca_arg);
    };
  }
  std::string url_file;
  if (a.dashboard) {
    o.dashboard = true;
    url_file = o.out_dir + "/dashboard.url";
    o.on_listening = [inner = o.on_listening, url_file, scheme](const std::string& address, const std::string& token) {
      if (inner) inner(address, token);
      announce_dashboard(scheme + "://" + address + kDashboardPath + "#token=" + token, url_file);
    };
  }
  if (!o.quiet) {
    fmt::print(stderr, "tensorwire run {}: {} ranks of {} on {}\n", o.run_id, ranks, a.profile, launcher->describe());
  }
  // The address and token files go with the run, however it ends.
  struct RemoveAtExit {
    const std::string& file;
    ~RemoveAtExit() {
      std::error_code ec;
      if (!file.empty()) std::filesystem::remove(file, ec);
    }
  } remove_url{url_file}, remove_token{token_file};
  const RunOutcome out = run_controller(p, o, *launcher);
  // An agent killed here (by a signal, an OOM killer) could not remove its working
  // directory; the agents started on this machine are all gone by now.
  if (a.local > 0 || a.testbed > 0) remove_stale_temp_dirs(temp_parent(), "tensorwire-agent");

  std::vector<Nanos> times;  // at the original's speed
  for (const auto& [b, e] : out.iterations) times.push_back(scale.scale_back(e - b));
  if (a.json) {
    nlohmann::json j;
    j["run"] = o.run_id;
    j["ok"] = out.ok;
    if (!out.ok) j["error"] = out.error;
    j["out"] = out.out_dir;
    j["iteration_ns"] = times;
    j["bytes_sent"] = out.bytes_sent;
    j["setup_ns"] = out.setup_ns;
    j["setup_phases_ns"] = setup_phases_json(out);
    j["collect_ns"] = out.collect_ns;
    nlohmann::json agents = nlohmann::json::array();
    for (const AgentInfo& ag : out.agents) {
      nlohmann::json x = {{"rank", ag.rank}, {"host", ag.host}, {"pid", ag.pid}, {"finished", ag.finished}};
      if (!ag.clock.empty()) {
        x["clock_offset_ns"] = ag.clock.points().front().second.offset;
        x["clock_bound_ns"] = ag.clock.max_bound();
        x["clock_drift_ns"] = ag.clock.drift();
      }
      agents.push_back(std::move(x));
    }
    j["agents"] = std::move(agents);
    fmt::print("{}\n", json_text(j, 2));
  } else {
    TextTable t({"rank", "host", "pid", "clock offset", "bound", "iterations"});
    for (const AgentInfo& ag : out.agents) {
      const bool c = !ag.clock.empty();
      t.add({std::to_string(ag.rank), ag.host, std::to_string(ag.pid),
             c ? signed_duration(ag.clock.points().front().second.offset) : "-", c ? "±" + human_duration(ag.clock.max_bound()) : "-",
             ag.finished ? "all" : (ag.error.empty() ? "-" : "failed")});
    }
    fmt::print("{}", t.str());
    if (!times.empty()) {
      fmt::print("\n{} iterations: median {}, p95 {}, max {}; {} sent\n", times.size(), human_duration(percentile(times, 0.5)),
                 human_duration(percentile(times, 0.95)), human_duration(percentile(times, 1.0)), human_bytes(out.bytes_sent));
    }
    const auto& ph = out.setup_phases;
    fmt::print("setup {} (launch to the common start: prepare {}, join {}, connect {}, sync {}); results {} after the last iteration\n",
               human_duration(out.setup_ns), human_duration(ph.prepare), human_duration(ph.join), human_duration(ph.connect),
               human_duration(ph.sync), human_duration(out.collect_ns));
    if (scale.factor() != 1) fmt::print("time-scaled: the agents ran {}x slower; times above are scaled back\n", scale.factor());
    fmt::print("results in {}\n", out.out_dir);
  }
  // The comparison: against the profile's observed timings, or else its plan.
  if (out.ok && !times.empty()) {
    const CompareResult cr = write_run_comparison(original, out.out_dir);
    if (!a.json) {
      fmt::print("\n{}", comparison_text(cr.profile, cr.comparison));
      if (!cr.note.empty()) fmt::print("\n{}\n", cr.note);
    }
  }
  if (!out.ok) {
    fmt::print(stderr, "tensorwire run: {}\n", out.error);
    return out.interrupted ? 130 : 1;
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* r = app.add_subcommand("run", "Replay a profile with agents started and driven by a controller");
  r->footer(
      "Where the agents run (exactly one):\n"
      "  --local N          N agent processes on this machine\n"
      "  --testbed N        agents on the N hosts of a namespace testbed, ranks in blocks (tensorwire testbed --help)\n"
      "  --hosts LIST       over ssh, LIST like user@vm1,vm2:2 (HOST:SLOTS = ranks per host, in order)\n"
      "  --expect N         agents started elsewhere dial in: TW_TOKEN=$(cat OUT/token) tensorwire agent --controller\n"
      "                     ADDR:PORT (the run writes its token there, mode 0600, and removes it at the end)\n"
      "The run directory (--out, default runs/RUN_ID) gets every agent's results on the controller's clock,\n"
      "the profile replayed and run.json; while it runs, GET /api/runs, /api/runs/RUN_ID and /metrics and the\n"
      "WebSocket /api/feed on the controller's address answer to 'Authorization: Bearer TOKEN'.");
  r->add_option("profile", a->profile, "Traffic profile (YAML)")->required();
  r->add_option("--local", a->local, "Run N agents as local processes (one per rank)");
  r->add_option("--hosts", a->hosts, "Run agents over ssh on these hosts: user@host[:slots],...");
  r->add_option("--expect", a->expect, "Wait for N agents started by something else");
  r->add_option("--testbed", a->testbed, "Run agents in a namespace testbed of N hosts (brought up if it is not)");
  r->add_option("--name", a->testbed_name, "Testbed name")->capture_default_str();
  r->add_option("--rate", a->rate, "Testbed: every host's link rate, like 10gbit");
  r->add_option("--pair", a->pairs, "Testbed: A-B:rate=R,delay=D between two hosts (repeatable)");
  r->add_flag("--keep", a->keep, "Testbed: leave it up after the run");
  r->add_option("--time-scale", a->time_scale,
                "Stretch every compute time, gap and delay by K (replay a fast network's job on a K times slower one); "
                "results are scaled back");
  r->add_option("--listen", a->listen, "ADDR:PORT the controller listens on (default 127.0.0.1, any port)");
  r->add_option("--token", a->token,
                "The run's token (default: TW_TOKEN, else a random one); a command line is visible to every user, "
                "so prefer TW_TOKEN");
  r->add_option("--out", a->out, "Run directory (default runs/RUN_ID)");
  r->add_option("--agent-bin", a->agent_bin, "Path of tensorwire on the ssh hosts (default: this binary's path)");
  r->add_option("--ssh-config", a->ssh_config, "ssh configuration file (ssh -F)");
  r->add_option("--slow-rank", a->slow_ranks, "RANK:FACTOR: stretch one rank's compute (repeatable)");
  r->add_option("--join-timeout", a->join_timeout_s, "Seconds for every agent to dial in (longer when more than 16 agents a core share this machine)")->capture_default_str();
  r->add_option("--timeout", a->timeout_s, "Seconds the run may take (default: no limit)");
  r->add_flag("--quiet", a->quiet, "No progress output");
  r->add_flag("--dashboard", a->dashboard,
              "Serve a live dashboard (run status, iteration times, per-link throughput, agents and clocks) and print its "
              "address; its link carries the token in the fragment (on a terminal; else in OUT/dashboard.url, mode 0600)");
  r->add_option("--tls-cert", a->tls_cert,
                "TLS on the control plane (HTTPS, WSS): the controller's certificate chain (PEM); agents this run starts "
                "trust it (--controller-ca); see docs/protocol.md")
      ->check(CLI::ExistingFile);
  r->add_option("--tls-key", a->tls_key, "The private key of --tls-cert (PEM; keep it readable by you only)")->check(CLI::ExistingFile);
  r->add_flag("--json", a->json, "Machine-readable summary on stdout");
  add_replay_options(r, a->replay);
  r->callback([&action, a] { action = [a] { return run_command(*a); }; });
}

}  // namespace tw::cli

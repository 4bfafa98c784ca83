// `tensorwire testbed up|status|down`: hosts as network namespaces.
#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/text_table.hpp"
#include "tensorwire/launch/testbed.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw::cli {
namespace {

struct TestbedArgs {
  std::string name = "tw";
  std::uint32_t hosts = 0;
  std::string rate;
  std::vector<std::string> pairs;
  bool json = false;
  bool when_stdin_closes = false;
};

TestbedSpec spec_from(const TestbedArgs& a) { return make_testbed_spec(a.name, a.hosts, a.rate, a.pairs); }

int up(const TestbedArgs& a) {
  if (a.hosts == 0 || a.hosts > 250) throw std::invalid_argument("--hosts: from 1 to 250");
  const TestbedSpec s = spec_from(a);
  if (const auto existing = find_testbed(s.name)) {
    if (existing->hosts != s.hosts) {
      throw std::invalid_argument("testbed " + s.name + " is up with " + std::to_string(existing->hosts) +
                                  " hosts; `tensorwire testbed down` first");
    }
    testbed_reshape(s);
    fmt::print("testbed {}: {} hosts, re-shaped\n", s.name, s.hosts);
    return 0;
  }
  testbed_up(s);
  fmt::print("testbed {}: {} hosts up, {}1..{} on bridge {} ({}); run agents with `tensorwire run PROFILE --testbed {}`\n", s.name,
             s.hosts, s.subnet_prefix(), s.hosts, s.bridge(), s.bridge_address(), s.hosts);
  return 0;
}

int status(const TestbedArgs& a) {
  check_testbed_name(a.name);
  const auto s = find_testbed(a.name);
  if (!s) {
    fmt::print(stderr, "testbed {} is not up\n", a.name);
    return 1;
  }
  const auto counters = testbed_counters(*s);
  if (a.json) {
    nlohmann::json j = nlohmann::json::parse(testbed_spec_json(*s));
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& c : counters) {
      hosts.push_back({{"host", c.host},           {"namespace", s->ns(c.host)},   {"address", s->address(c.host)},
                       {"tx_bytes", c.tx_bytes},   {"rx_bytes", c.rx_bytes},       {"tx_packets", c.tx_packets},
                       {"rx_packets", c.rx_packets}, {"drops", c.drops}});
    }
    j["bridge"] = {{"name", s->bridge()}, {"address", s->bridge_address()}};
    j["host_list"] = std::move(hosts);
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  fmt::print("testbed {}: {} hosts on bridge {} ({}), link rate {}\n", s->name, s->hosts, s->bridge(), s->bridge_address(),
             s->rate ? format_rate(s->rate) : "not limited");
  TextTable t({"host", "namespace", "address", "sent", "received", "packets out/in", "drops"});
  for (const auto& c : counters) {
    t.add({std::to_string(c.host), s->ns(c.host), s->address(c.host), human_bytes(c.tx_bytes), human_bytes(c.rx_bytes),
           std::to_string(c.tx_packets) + "/" + std::to_string(c.rx_packets), std::to_string(c.drops)});
  }
  fmt::print("{}", t.str());
  if (!s->pairs.empty()) {
    TextTable pt({"pair", "rate", "delay (emulated by the agents)"});
    for (const auto& p : s->pairs) {
      pt.add({std::to_string(p.a) + "-" + std::to_string(p.b), p.rate ? format_rate(p.rate) : "-", p.delay ? human_duration(p.delay) : "-"});
    }
    fmt::print("\n{}", pt.str());
  }
  return 0;
}

// The guard of a run's testbed (TestbedLease): in a session of its own and deaf
// to the terminal, it waits for its stdin (a pipe from the run) to close; the run
// kills it first when it ends normally, so end-of-file means the run died.
void wait_for_stdin_to_close() {
  ::setsid();
  for (const int sig : {SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGPIPE}) std::signal(sig, SIG_IGN);
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR)) return;
  }
}

int down(const TestbedArgs& a) {
  check_testbed_name(a.name);
  if (a.when_stdin_closes) {
    wait_for_stdin_to_close();
    const auto removed = testbed_down(a.name);
    remove_stale_temp_dirs(temp_parent(), "tensorwire-agent");
    if (!removed.empty()) {
      fmt::print(stderr, "tensorwire testbed: the run that brought testbed {} up is gone; removed {} namespaces, links and processes\n",
                 a.name, removed.size());
    }
    return 0;
  }
  const auto removed = testbed_down(a.name);
  fmt::print("testbed {}: {}\n", a.name, removed.empty() ? std::string("nothing to remove") : "removed " + std::to_string(removed.size()) + " namespaces, links and processes");
  return 0;
}

}  // namespace

void add_testbed_command(CLI::App& app, Action& action) {
  CLI::App* t = app.add_subcommand("testbed", "Hosts as network namespaces with shaped links (root)");
  t->require_subcommand(0, 1);
  t->footer(
      "Hosts are namespaces NAME-h0.. joined by veth pairs to a bridge NAME-br in this namespace, where\n"
      "the controller runs. Rates are shaped with htb/tbf; delay is emulated by the agents (no netem here).\n"
      "Everything is named after --name, so `down` also removes what a crashed run left.");
  auto a = std::make_shared<TestbedArgs>();
  CLI::App* u = t->add_subcommand("up", "Bring a testbed up (or re-shape the one that is up)");
  u->add_option("--hosts", a->hosts, "Number of hosts")->required();
  u->add_option("--rate", a->rate, "Every host's link rate, each direction, like 10gbit");
  u->add_option("--pair", a->pairs, "A-B:rate=R,delay=D for the traffic between hosts A and B (repeatable)");
  u->add_option("--name", a->name, "Testbed name")->capture_default_str();
  u->callback([&action, a] { action = [a] { return up(*a); }; });
  CLI::App* s = t->add_subcommand("status", "Hosts, addresses, rates and live per-link counters");
  s->add_option("--name", a->name, "Testbed name")->capture_default_str();
  s->add_flag("--json", a->json, "Machine-readable output");
  s->callback([&action, a] { action = [a] { return status(*a); }; });
  CLI::App* d = t->add_subcommand("down", "Remove the testbed (idempotent; also leftovers of a crash)");
  d->add_option("--name", a->name, "Testbed name")->capture_default_str();
  // The guard a run starts for a testbed it brought up (TestbedLease): not for users.
  d->add_flag("--when-stdin-closes", a->when_stdin_closes, "Wait until stdin closes, then remove the testbed")->group("");
  d->callback([&action, a] { action = [a] { return down(*a); }; });
}

}  // namespace tw::cli

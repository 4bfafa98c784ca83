// The namespace testbed: N hosts as Linux network namespaces, each joined by a
// veth pair to one bridge (the switch) in the root namespace, where the controller
// runs. Rates are shaped with htb (per host: its link, both directions; per pair
// of hosts: the traffic between them, at each sender); this kernel has no netem,
// so extra latency per pair is emulated by the agents.
//
// Everything is named from the testbed's name (default "tw"): namespaces
// NAME-h0.., the bridge NAME-br, root-side veths NAME-v0..; so `down` finds
// leftovers of a crashed run without any state. The spec of a testbed that is up
// is kept in /run/tensorwire/testbed-NAME.json for `status` and `run`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/units.hpp"

namespace tw {

// A tc-style rate: "10gbit", "300mbit", "64kbit", "1000000bit"; bits per second.
std::optional<std::uint64_t> parse_rate(const std::string& text);
std::string format_rate(std::uint64_t bps);

struct PairShape {
  std::uint32_t a = 0, b = 0;  // hosts; the shape applies both ways
  std::uint64_t rate = 0;      // bits/s, 0: not limited
  Nanos delay = 0;             // one-way, emulated by the agents
};

struct TestbedSpec {
  std::string name = "tw";
  std::uint32_t hosts = 0;
  std::uint64_t rate = 0;  // per host, each direction; 0: not limited
  std::vector<PairShape> pairs;

  std::string ns(std::uint32_t host) const { return name + "-h" + std::to_string(host); }
  std::string bridge() const { return name + "-br"; }
  std::string root_veth(std::uint32_t host) const { return name + "-v" + std::to_string(host); }
  // 10.213.X.0/24 with X from the name, so testbeds of different names coexist.
  std::string subnet_prefix() const;
  std::string address(std::uint32_t host) const { return subnet_prefix() + std::to_string(host + 1); }
  std::string bridge_address() const { return subnet_prefix() + "254"; }
  // The emulated one-way delay from host a to host b.
  Nanos delay(std::uint32_t a, std::uint32_t b) const;
};

// "1-3:rate=300mbit,delay=5ms"; throws std::invalid_argument naming the problem.
PairShape parse_pair(const std::string& text, std::uint32_t hosts);

// A spec from command-line text: --name, --hosts, --rate (may be empty), --pair
// entries; throws std::invalid_argument naming the bad option.
TestbedSpec make_testbed_spec(const std::string& name, std::uint32_t hosts, const std::string& rate,
                              const std::vector<std::string>& pairs);

// Checks a name: letters, digits, '-', at most 8 characters (interface names are short).
void check_testbed_name(const std::string& name);

// The commands (argv) that build the testbed, and those that shape it (replacing
// any earlier shaping), in order; a command whose first word is "-" may fail (the
// "-" is not part of it). Pure: tests read them.
std::vector<std::vector<std::string>> testbed_up_commands(const TestbedSpec& spec);
std::vector<std::vector<std::string>> testbed_shaping_commands(const TestbedSpec& spec);

std::string testbed_spec_json(const TestbedSpec& spec);
TestbedSpec testbed_spec_from_json(const std::string& text);  // throws std::runtime_error

// ---- on the machine (root) ----

std::string testbed_state_path(const std::string& name);
// The spec of the testbed called `name` if it is up.
std::optional<TestbedSpec> find_testbed(const std::string& name);
// Builds and shapes it, and records its spec. On failure, removes what it built
// and throws std::runtime_error with the command that failed and its message.
void testbed_up(const TestbedSpec& spec);
// Re-shapes a testbed that is up (rates and pairs of `spec`), and records it.
void testbed_reshape(const TestbedSpec& spec);
// Removes everything named after `name`, killing what still runs in its
// namespaces first; idempotent. Returns what it removed.
std::vector<std::string> testbed_down(const std::string& name);

struct LinkCounters {
  std::uint32_t host = 0;
  std::uint64_t tx_bytes = 0, rx_bytes = 0;  // of the host (its side of the link)
  std::uint64_t tx_packets = 0, rx_packets = 0, drops = 0;
};
std::vector<LinkCounters> testbed_counters(const TestbedSpec& spec);

}  // namespace tw

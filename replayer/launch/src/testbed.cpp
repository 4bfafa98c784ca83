// The testbed on the machine: runs the ip and tc commands of the plan, keeps the
// spec of a testbed that is up, and removes everything named after it.
#include "tensorwire/launch/testbed.hpp"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/launch/child_process.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw {

namespace fs = std::filesystem;

namespace {

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs the commands in order; throws at the first one that fails (unless marked "-").
void run_all(const std::vector<std::vector<std::string>>& commands) {
  for (auto argv : commands) {
    const bool may_fail = !argv.empty() && argv[0] == "-";
    if (may_fail) argv.erase(argv.begin());
    const CommandResult r = run_command(argv);
    if (!r.ok() && !may_fail) {
      std::string why = r.output.empty() ? (r.status < 0 ? "timed out" : ChildProcess::describe(r.status)) : r.output;
      if (const auto nl = why.find('\n'); nl != std::string::npos) why = why.substr(0, nl);
      throw std::runtime_error("testbed: `" + joined(argv) + "` failed: " + why);
    }
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::uint64_t read_counter(const std::string& dev, const char* name) {
  std::ifstream in("/sys/class/net/" + dev + "/statistics/" + name);
  std::uint64_t v = 0;
  in >> v;
  return v;
}

void save_state(const TestbedSpec& spec) {
  fs::create_directories(fs::path(testbed_state_path(spec.name)).parent_path());
  write_file_atomic(testbed_state_path(spec.name), testbed_spec_json(spec));
}

}  // namespace

std::string testbed_state_path(const std::string& name) { return "/run/tensorwire/testbed-" + name + ".json"; }

std::optional<TestbedSpec> find_testbed(const std::string& name) {
  std::ifstream in(testbed_state_path(name));
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  TestbedSpec spec = testbed_spec_from_json(ss.str());
  // The state outlives a reboot or a manual cleanup: trust it only if the bridge is there.
  if (!fs::exists("/sys/class/net/" + spec.bridge())) return std::nullopt;
  return spec;
}

void testbed_up(const TestbedSpec& spec) {
  check_testbed_name(spec.name);
  if (spec.hosts == 0 || spec.hosts > 250) throw std::invalid_argument("--hosts: from 1 to 250");
  if (fs::exists("/sys/class/net/" + spec.bridge())) {
    throw std::runtime_error("testbed " + spec.name + " is already up (`tensorwire testbed down --name " + spec.name + "` first)");
  }
  try {
    run_all(testbed_up_commands(spec));
    run_all(testbed_shaping_commands(spec));
    save_state(spec);
  } catch (...) {
    testbed_down(spec.name);
    throw;
  }
}

void testbed_reshape(const TestbedSpec& spec) {
  run_all(testbed_shaping_commands(spec));
  save_state(spec);
}

std::vector<std::string> testbed_down(const std::string& name) {
  check_testbed_name(name);
  std::vector<std::string> removed;
  const std::string ns_prefix = name + "-h";
  for (const std::string& line : lines_of(run_command({"ip", "netns", "list"}).output)) {
    const std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind(ns_prefix, 0) == 0 && ns.find_first_not_of("0123456789", ns_prefix.size()) == std::string::npos &&
        ns.size() > ns_prefix.size()) {
      // A process left inside (an agent whose run died) would keep the namespace
      // alive, unnamed, after `ip netns del`.
      std::vector<pid_t> killed;
      for (const std::string& pid : lines_of(run_command({"ip", "netns", "pids", ns}).output)) {
        if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        if (::kill(std::stoi(pid), SIGKILL) == 0) {
          killed.push_back(std::stoi(pid));
          removed.push_back("process " + pid + " in " + ns);
        }
      }
      // Until they are gone (at most 2 s), so that what they held goes with them.
      for (int i = 0; i < 200 && !killed.empty(); ++i) {
        std::erase_if(killed, process_gone);
        if (!killed.empty()) ::usleep(10000);
      }
      if (run_command({"ip", "netns", "del", ns}).ok()) removed.push_back("namespace " + ns);
    }
  }
  // Root-side veths go with their namespaces; the bridge (and any veth left) here.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/class/net", ec)) {
    const std::string dev = e.path().filename().string();
    const bool ours = dev == name + "-br" ||
                      (dev.rfind(name + "-v", 0) == 0 && dev.size() > name.size() + 2 &&
                       dev.find_first_not_of("0123456789", name.size() + 2) == std::string::npos);
    if (ours && run_command({"ip", "link", "del", dev}).ok()) removed.push_back("link " + dev);
  }
  fs::remove(testbed_state_path(name), ec);
  return removed;
}

std::vector<LinkCounters> testbed_counters(const TestbedSpec& spec) {
  std::vector<LinkCounters> out;
  for (std::uint32_t h = 0; h < spec.hosts; ++h) {
    // The root side of a host's link sees the host's traffic mirrored.
    const std::string v = spec.root_veth(h);
    LinkCounters c;
    c.host = h;
    c.tx_bytes = read_counter(v, "rx_bytes");
    c.rx_bytes = read_counter(v, "tx_bytes");
    c.tx_packets = read_counter(v, "rx_packets");
    c.rx_packets = read_counter(v, "tx_packets");
    c.drops = read_counter(v, "tx_dropped") + read_counter(v, "rx_dropped");
    out.push_back(c);
  }
  return out;
}

}  // namespace tw

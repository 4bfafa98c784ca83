#include "tensorwire/launch/launchers.hpp"

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tensorwire/util/shell_quote.hpp"

namespace tw {

std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

std::string ProcessLauncher::log_path(RankId rank) const { return log_dir_ + "/agent-" + std::to_string(rank) + ".log"; }

void ProcessLauncher::start(RankId rank, const std::vector<std::string>& argv, SpawnOptions options, std::string label) {
  std::filesystem::create_directories(log_dir_);
  options.output_path = log_path(rank);
  children_.push_back({ChildProcess::spawn(argv, options), rank, std::move(label)});
}

std::vector<std::pair<RankId, std::string>> ProcessLauncher::ended() {
  std::vector<std::pair<RankId, std::string>> out;
  for (Child& c : children_) {
    if (c.reported) continue;
    if (const auto st = c.process.poll()) {
      c.reported = true;
      std::string s = c.label + " " + ChildProcess::describe(*st);
      const std::string said = last_log_line(log_path(c.rank));
      if (!said.empty()) s += ": " + said;
      out.emplace_back(c.rank, std::move(s));
    }
  }
  return out;
}

void ProcessLauncher::stop(Nanos grace) {
  for (Child& c : children_) {
    c.process.signal(SIGTERM);
    c.process.signal(SIGCONT);  // a stopped process handles the SIGTERM only once continued
  }
  for (Child& c : children_) c.process.stop(static_cast<int>(grace / kMilli));
}

LocalLauncher::LocalLauncher(std::string exe, std::size_t agents, std::string log_dir, std::vector<std::string> agent_args)
    : ProcessLauncher(std::move(log_dir)), exe_(std::move(exe)), n_(agents), args_(std::move(agent_args)) {}

std::string LocalLauncher::describe() const { return std::to_string(n_) + " local agent processes"; }

void LocalLauncher::launch(const std::string& controller, const std::string& token) {
  for (std::size_t r = 0; r < n_; ++r) {
    std::vector<std::string> argv = {exe_, "agent", "--controller", controller, "--rank-hint", std::to_string(r)};
    argv.insert(argv.end(), args_.begin(), args_.end());
    SpawnOptions so;
    so.env = {"TW_TOKEN=" + token};
    start(static_cast<RankId>(r), argv, so, "local agent process");
  }
}

SshLauncher::SshLauncher(std::vector<HostSlots> hosts, std::size_t ranks, std::string agent_bin, std::string ssh_config,
                         std::string log_dir, std::vector<std::string> agent_args)
    : ProcessLauncher(std::move(log_dir)),
      hosts_(std::move(hosts)),
      placement_(place_ranks(hosts_, ranks)),
      agent_bin_(std::move(agent_bin)),
      ssh_config_(std::move(ssh_config)),
      args_(std::move(agent_args)) {}

std::string SshLauncher::describe() const {
  std::string s = "ssh to ";
  for (std::size_t i = 0; i < hosts_.size(); ++i) s += (i ? ", " : "") + hosts_[i].target;
  return s;
}

void SshLauncher::launch(const std::string& controller, const std::string& token) {
  for (std::size_t r = 0; r < placement_.size(); ++r) {
    std::vector<std::string> argv = {"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"};
    if (!ssh_config_.empty()) argv.insert(argv.end(), {"-F", ssh_config_});
    argv.push_back(hosts_[placement_[r]].target);
    argv.push_back("--");
    std::string remote = shell_quote(agent_bin_) + " agent --controller " + shell_quote(controller) + " --rank-hint " +
                         std::to_string(r) + " --token-stdin";
    for (const auto& a : args_) remote += " " + shell_quote(a);
    argv.push_back(remote);
    SpawnOptions so;
    so.stdin_text = token + "\n";
    start(static_cast<RankId>(r), argv, so, "ssh to " + hosts_[placement_[r]].target);
  }
}

TestbedLauncher::TestbedLauncher(TestbedSpec spec, std::size_t ranks, std::string exe, std::string log_dir,
                                 std::vector<std::string> agent_args)
    : ProcessLauncher(std::move(log_dir)), spec_(std::move(spec)), ranks_(ranks), exe_(std::move(exe)), args_(std::move(agent_args)) {}

std::string TestbedLauncher::describe() const {
  return std::to_string(spec_.hosts) + " hosts of testbed " + spec_.name + " (namespaces " + spec_.ns(0) + ".." +
         spec_.ns(spec_.hosts - 1) + ")";
}

std::uint32_t TestbedLauncher::host_of(RankId rank) const {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(rank) * spec_.hosts / std::max<std::size_t>(ranks_, 1));
}

void TestbedLauncher::launch(const std::string& controller, const std::string& token) {
  for (std::size_t r = 0; r < ranks_; ++r) {
    const std::string ns = spec_.ns(host_of(static_cast<RankId>(r)));
    std::vector<std::string> argv = {exe_, "agent", "--controller", controller, "--rank-hint", std::to_string(r), "--host-name", ns};
    argv.insert(argv.end(), args_.begin(), args_.end());
    SpawnOptions so;
    so.env = {"TW_TOKEN=" + token};
    // Joined directly, not through `ip netns exec`: one program less to start
    // per agent, and no mount namespace with its own /sys, which agents do not read.
    so.netns = ns;
    start(static_cast<RankId>(r), argv, so, "agent in namespace " + ns);
  }
}

}  // namespace tw

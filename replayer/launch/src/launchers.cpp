#include "tensorwire/launch/launchers.hpp"

#include <sys/wait.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace tw {

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string entry = text.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) throw std::invalid_argument("--hosts: an empty entry in \"" + text + "\"");
    HostSlots h;
    h.target = entry;
    const auto colon = entry.rfind(':');
    if (colon != std::string::npos && entry.find(']') == std::string::npos) {
      unsigned slots = 0;
      const char* b = entry.data() + colon + 1;
      const char* e = entry.data() + entry.size();
      const auto r = std::from_chars(b, e, slots);
      if (r.ec != std::errc() || r.ptr != e || slots == 0 || slots > 4096) {
        throw std::invalid_argument("--hosts: \"" + entry + "\": slots must be a number from 1 to 4096");
      }
      h.slots = slots;
      h.target = entry.substr(0, colon);
    }
    const auto atsign = h.target.find('@');
    h.host = atsign == std::string::npos ? h.target : h.target.substr(atsign + 1);
    if (h.host.empty() || h.target.front() == '-') throw std::invalid_argument("--hosts: \"" + entry + "\" names no host");
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<std::size_t> place_ranks(const std::vector<HostSlots>& hosts, std::size_t ranks) {
  std::vector<std::size_t> place;
  for (std::size_t h = 0; h < hosts.size() && place.size() < ranks; ++h) {
    for (std::uint32_t k = 0; k < hosts[h].slots && place.size() < ranks; ++k) place.push_back(h);
  }
  if (place.size() < ranks) {
    std::size_t slots = 0;
    for (const auto& h : hosts) slots += h.slots;
    throw std::invalid_argument("--hosts: " + std::to_string(slots) + " slot(s) for " + std::to_string(ranks) +
                                " ranks; give more hosts or HOST:SLOTS");
  }
  return place;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

namespace {

// Quotes one word for the remote shell.
std::string shell_quote(const std::string& w) {
  std::string out = "'";
  for (char c : w) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace

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

}  // namespace tw

// Where `tensorwire run` starts its agents: as local processes, over ssh, or
// nowhere (agents started by something else dial in). Each agent is told the
// rank it was meant for (--rank-hint), so placement follows the host list.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/controller/controller.hpp"
#include "tensorwire/launch/child_process.hpp"
#include "tensorwire/launch/hosts.hpp"
#include "tensorwire/launch/testbed.hpp"

namespace tw {

// Agents behind child processes of this one (the agents themselves, or ssh
// clients): each logs to DIR/agent-R.log; an early end is reported with the log's
// last line.
class ProcessLauncher : public Launcher {
 public:
  explicit ProcessLauncher(std::string log_dir) : log_dir_(std::move(log_dir)) {}
  std::vector<std::pair<RankId, std::string>> ended() override;
  void stop(Nanos grace) override;

 protected:
  // Starts the process for `rank`; `label` names it in messages ("ssh to vm1").
  void start(RankId rank, const std::vector<std::string>& argv, SpawnOptions options, std::string label);

 private:
  struct Child {
    ChildProcess process;
    RankId rank;
    std::string label;
    bool reported = false;
  };
  std::string log_path(RankId rank) const;
  std::string log_dir_;
  std::vector<Child> children_;
};

// N agents as child processes of this one (they die with it).
class LocalLauncher final : public ProcessLauncher {
 public:
  LocalLauncher(std::string exe, std::size_t agents, std::string log_dir, std::vector<std::string> agent_args = {});
  std::string describe() const override;
  void launch(const std::string& controller, const std::string& token) override;

 private:
  std::string exe_;
  std::size_t n_;
  std::vector<std::string> args_;
};

// One ssh session per rank: `ssh HOST -- AGENT_BIN agent --controller ...
// --token-stdin`; the token goes through ssh's stdin, never on a command line,
// and the open stdin ties the remote agent's life to this process.
class SshLauncher final : public ProcessLauncher {
 public:
  SshLauncher(std::vector<HostSlots> hosts, std::size_t ranks, std::string agent_bin, std::string ssh_config,
              std::string log_dir, std::vector<std::string> agent_args = {});
  std::string describe() const override;
  void launch(const std::string& controller, const std::string& token) override;

 private:
  std::vector<HostSlots> hosts_;
  std::vector<std::size_t> placement_;
  std::string agent_bin_;
  std::string ssh_config_;
  std::vector<std::string> args_;
};

// One agent per host namespace of a testbed (ranks spread over the hosts in
// blocks, like slots), each started in its host's network namespace.
class TestbedLauncher final : public ProcessLauncher {
 public:
  TestbedLauncher(TestbedSpec spec, std::size_t ranks, std::string exe, std::string log_dir,
                  std::vector<std::string> agent_args = {});
  std::string describe() const override;
  void launch(const std::string& controller, const std::string& token) override;
  std::uint32_t host_of(RankId rank) const;

 private:
  TestbedSpec spec_;
  std::size_t ranks_;
  std::string exe_;
  std::vector<std::string> args_;
};

// Agents started elsewhere (a cluster scheduler): nothing to launch.
class ExternalAgents final : public Launcher {
 public:
  explicit ExternalAgents(std::size_t n) : n_(n) {}
  std::string describe() const override { return std::to_string(n_) + " agents started elsewhere"; }
  void launch(const std::string&, const std::string&) override {}
  std::vector<std::pair<RankId, std::string>> ended() override { return {}; }
  void stop(Nanos) override {}

 private:
  std::size_t n_;
};

// The last non-empty line of a log file ("" if none): what a failed agent said.
std::string last_log_line(const std::string& path);

}  // namespace tw

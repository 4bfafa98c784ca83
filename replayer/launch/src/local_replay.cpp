#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/launch/local_replay.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "tensorwire/agent/agent.hpp"
#include "tensorwire/util/token.hpp"
#include "tensorwire/util/realtime.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/launch/child_process.hpp"
#include "tensorwire/protocol/roster.hpp"
#include "tensorwire/util/system_call.hpp"
#include "tensorwire/util/unique_fd.hpp"

namespace tw {
namespace {

// A listening TCP socket on 127.0.0.1 with a kernel-chosen port.
class LoopbackListener {
 public:
  LoopbackListener() : fd_(system_call("socket", ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0))) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd_.get(), 128) != 0 ||
        ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      system_call("cannot listen on 127.0.0.1", -1);
    }
    port_ = ntohs(sa.sin_port);
  }
  int fd() const { return fd_.get(); }
  std::uint16_t port() const { return port_; }

 private:
  UniqueFd fd_;
  std::uint16_t port_ = 0;
};

}  // namespace

nlohmann::json read_agent_summary(const std::string& out_dir, RankId rank) { return run_dir::read_summary(out_dir, rank); }

LocalReplayResult read_run_summaries(const std::string& out_dir, std::size_t ranks) {
  LocalReplayResult r;
  for (std::size_t i = 0; i < ranks; ++i) {
    const nlohmann::json j = read_agent_summary(out_dir, static_cast<RankId>(i));
    const auto& its = j.at("iteration_times_ns");
    if (r.iterations.size() < its.size()) r.iterations.resize(its.size(), {0, 0});
    for (std::size_t k = 0; k < its.size(); ++k) {
      const Nanos s = its[k].at(0).get<Nanos>();
      const Nanos e = its[k].at(1).get<Nanos>();
      auto& [rs, re] = r.iterations[k];
      rs = rs == 0 ? s : std::min(rs, s);
      re = std::max(re, e);
    }
    r.messages += j.at("counters").at("messages_received").get<std::uint64_t>();
    r.bytes += j.at("counters").at("bytes_received").get<std::uint64_t>();
  }
  return r;
}

LocalReplayResult run_local_replay(const Profile& profile, const LocalReplayOptions& o) {
  const std::size_t n = profile.ranks.size();
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) throw std::runtime_error(o.out_dir + ": cannot create: " + ec.message());

  std::vector<LoopbackListener> listeners;
  Roster roster;
  roster.token = random_token();
  for (std::size_t r = 0; r < n; ++r) {
    listeners.emplace_back();
    roster.ranks.push_back({static_cast<std::uint32_t>(r), "127.0.0.1", listeners.back().port()});
  }
  const std::string roster_path = (std::filesystem::path(o.out_dir) / "roster.yaml").string();
  write_private_file_atomic(roster_path, write_roster(roster));  // it holds the token
  for (std::size_t r = 0; r < n; ++r) std::filesystem::remove(run_dir::summary_file(o.out_dir, static_cast<RankId>(r)), ec);

  const Nanos start_at = realtime_ns() + o.start_delay;
  std::vector<ChildProcess> children;
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<std::string> argv = {o.exe, "agent", "--rank", std::to_string(r), "--profile", o.profile_path,
                                     "--roster", roster_path, "--out", o.out_dir, "--listen-fd", "3",
                                     "--start-at", std::to_string(start_at), "--quiet"};
    argv.insert(argv.end(), o.agent_args.begin(), o.agent_args.end());
    for (const auto& [rank, factor] : o.slow_ranks) {
      if (rank == r) argv.insert(argv.end(), {"--slowdown", std::to_string(factor)});
    }
    children.push_back(ChildProcess::spawn(argv, listeners[r].fd()));
  }
  listeners.clear();  // the agents hold them now

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(o.timeout);
  std::string failure;
  std::size_t failed_rank = 0;
  std::size_t running = n;
  while (running > 0) {
    running = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const auto st = children[r].poll();
      if (!st) {
        ++running;
      } else if (*st != 0 && failure.empty()) {
        failure = "the agent of rank " + std::to_string(r) + " " + ChildProcess::describe(*st);
        failed_rank = r;
      }
    }
    if (!failure.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      failure = "the replay did not finish within " + human_duration(o.timeout);
      break;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!failure.empty()) {
    for (auto& c : children) c.stop(2000);
    // The failing agent's own one-line error says more than its exit status; the
    // first to fail is the cause, the others mostly saw it close its connections.
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t r = (failed_rank + k) % n;
      nlohmann::json j;
      try {
        j = read_agent_summary(o.out_dir, static_cast<RankId>(r));
      } catch (const std::exception&) {
        continue;
      }
      const std::string e = j.value("error", "");
      if (!e.empty() && e.find("interrupted by signal") == std::string::npos) {
        failure = e;
        break;
      }
    }
    throw std::runtime_error("replay failed: " + failure);
  }
  return read_run_summaries(o.out_dir, n);
}

}  // namespace tw

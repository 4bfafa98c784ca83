// Which processes are ranks, which connections join them, and who serves whom.
#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "build_job.hpp"

namespace tw::build {

namespace {

// Launchers' rank variables, most specific first.
constexpr const char* kRankVariables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                          "SLURM_PROCID", "MV2_COMM_WORLD_RANK", "MPI_RANK", "DMLC_RANK"};

// The first rank variable that holds a rank. When none does but one holds
// something else (RANK=70000, RANK=x), that is said in `warnings` and *damaged set.
std::optional<std::pair<std::string, RankId>> env_rank(const ProcessTrace& t, std::vector<std::string>& warnings, bool* damaged) {
  std::string bad;
  for (const char* k : kRankVariables) {
    const auto it = t.env.find(k);
    if (it == t.env.end()) continue;
    RankId r = 0;
    const char* b = it->second.data();
    const char* e = b + it->second.size();
    const auto [p, ec] = std::from_chars(b, e, r);
    if (ec == std::errc() && p == e && r < limits::kMaxRanks) return std::make_pair(std::string(k) + "=" + it->second, r);
    if (bad.empty()) bad = std::string(k) + "=" + it->second.substr(0, 32);
  }
  if (!bad.empty()) {
    warnings.push_back("pid " + std::to_string(t.pid) + ": " + bad + " is no rank number (0 to " + std::to_string(limits::kMaxRanks - 1) +
                       "): ranked by host and pid after the numbered ones");
    *damaged = true;
  }
  return std::nullopt;
}

Bytes moved(const CaptureAnalysis& a, std::size_t process) {
  Bytes b = 0;
  for (const Connection& c : a.connections) {
    if (c.process == process) b += c.bytes_sent + c.bytes_received;
  }
  return b;
}

}  // namespace

Ranks find_ranks(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a, std::vector<std::string>& warnings) {
  Ranks out;
  out.of_process.assign(traces.size(), std::nullopt);
  // A process talks to another traced process when one of its connections has a
  // traced peer in a different process.
  std::vector<bool> talks(traces.size(), false);
  for (const Connection& c : a.connections) {
    if (c.peer && a.connections[*c.peer].process != c.process && c.bytes_sent + c.bytes_received > 0) {
      talks[c.process] = true;
    }
  }
  std::map<RankId, std::pair<std::size_t, std::string>> claimed;  // rank -> (process, how)
  std::set<std::size_t> numbered_badly;  // processes whose rank variable holds no rank
  for (std::size_t p = 0; p < traces.size(); ++p) {
    if (!talks[p]) continue;  // a launcher that exported RANK to its children does not talk
    bool damaged = false;
    const auto r = env_rank(traces[p], warnings, &damaged);
    if (damaged && !r) numbered_badly.insert(p);
    if (!r) continue;
    const auto [it, fresh] = claimed.try_emplace(r->second, p, r->first);
    if (fresh) continue;
    const std::size_t other = it->second.first;
    const bool mine = moved(a, p) > moved(a, other);
    warnings.push_back("rank " + std::to_string(r->second) + " is claimed by pids " + std::to_string(traces[other].pid) +
                       " and " + std::to_string(traces[p].pid) + "; it goes to pid " +
                       std::to_string(traces[mine ? p : other].pid) + ", which moved more bytes");
    if (mine) it->second = {p, r->first};
  }
  // Ranks from the environment keep their numbers when they are 0..N-1;
  // otherwise (a subset captured, or numbers from two jobs) they are renumbered
  // in order, and processes without one follow, by host and pid.
  std::vector<std::pair<std::size_t, std::string>> order;
  bool dense = !claimed.empty() && claimed.rbegin()->first + 1 == claimed.size();
  for (const auto& [r, v] : claimed) order.push_back(v);
  if (!dense && !claimed.empty()) warnings.push_back("the ranks in the environment are not 0.." + std::to_string(claimed.size() - 1) + ": renumbered in order");
  std::vector<std::size_t> rest;
  std::set<std::size_t> taken;
  for (const auto& v : order) taken.insert(v.first);
  for (std::size_t p = 0; p < traces.size(); ++p) {
    if (talks[p] && !taken.count(p)) rest.push_back(p);
  }
  std::sort(rest.begin(), rest.end(), [&](std::size_t x, std::size_t y) {
    return std::tie(traces[x].host, traces[x].pid) < std::tie(traces[y].host, traces[y].pid);
  });
  // When the launcher numbered the ranks, a process without a number is one of
  // its daemons (mpirun, orted, an elastic agent) or a helper, not a rank; one
  // whose number is damaged is a rank still, numbered after the others.
  if (!claimed.empty()) std::erase_if(rest, [&](std::size_t p) { return !numbered_badly.contains(p); });
  for (std::size_t p : rest) order.emplace_back(p, "traffic");
  for (const auto& [p, how] : order) {
    out.of_process[p] = static_cast<RankId>(out.ranks.size());
    RankInfo info;
    info.process = p;
    info.how = how;
    out.ranks.push_back(info);
  }
  return out;
}

std::vector<Direction> directions(const CaptureAnalysis& a, const Ranks& ranks) {
  std::vector<std::vector<std::size_t>> by_conn(a.connections.size());
  for (std::size_t i = 0; i < a.messages.size(); ++i) by_conn[a.messages[i].connection].push_back(i);
  std::vector<Direction> out;
  for (std::size_t c = 0; c < a.connections.size(); ++c) {
    const Connection& x = a.connections[c];
    if (x.bytes_sent == 0) continue;
    Direction d;
    d.conn = c;
    d.messages = std::move(by_conn[c]);
    const auto src = ranks.of_process[x.process];
    const auto dst = x.peer ? ranks.of_process[a.connections[*x.peer].process] : std::nullopt;
    // MASTER_PORT only hints: a job may carry its tensors there (a ZeroMQ server
    // bound on it); a store's connection is left out when its traffic does not
    // follow the iterations, like any other.
    d.store = x.role == ConnectionRole::store || (x.peer && a.connections[*x.peer].role == ConnectionRole::store);
    if (!x.peer) {
      d.use = "untraced peer";
    } else if (!src || !dst) {
      d.use = "launcher";
    } else if (*src == *dst) {
      d.use = "same rank";
    } else {
      d.src = *src;
      d.dst = *dst;
    }
    out.push_back(std::move(d));
  }
  return out;
}

void assign_roles(Ranks& ranks, const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a,
                  const std::vector<Direction>& dirs) {
  const std::size_t n = ranks.ranks.size();
  for (RankInfo& r : ranks.ranks) {
    const auto it = traces[r.process].env.find("TW_ROLE");
    if (it == traces[r.process].env.end()) continue;
    r.role_how = "TW_ROLE";
    r.role = it->second == "server" || it->second == "ps" ? Role::server : Role::worker;
  }
  // Heavy edges only: a framework's full mesh of connections carries set-up
  // traffic between workers too, which says nothing about who serves whom.
  Bytes heaviest = 0;
  std::map<std::pair<RankId, RankId>, Bytes> edge;
  for (const Direction& d : dirs) {
    if (d.use != "data") continue;
    const auto key = std::minmax(d.src, d.dst);
    edge[{key.first, key.second}] += a.connections[d.conn].bytes_sent;
  }
  for (const auto& [k, b] : edge) heaviest = std::max(heaviest, b);
  std::vector<std::vector<RankId>> adj(n);
  for (const auto& [k, b] : edge) {
    if (b * 10 < heaviest) continue;
    adj[k.first].push_back(k.second);
    adj[k.second].push_back(k.first);
  }
  // Two-colour the heavy graph; a server side must be strictly smaller, so a ring
  // of even size (also bipartite, equal sides) stays all workers.
  std::vector<int> colour(n, -1);
  bool bipartite = true;
  std::size_t side[2] = {0, 0};
  for (std::size_t s = 0; s < n && bipartite; ++s) {
    if (colour[s] != -1 || adj[s].empty()) continue;
    std::vector<std::size_t> stack{s};
    colour[s] = 0;
    while (!stack.empty() && bipartite) {
      const std::size_t u = stack.back();
      stack.pop_back();
      ++side[colour[u]];
      for (RankId v : adj[u]) {
        if (colour[v] == -1) {
          colour[v] = 1 - colour[u];
          stack.push_back(v);
        } else if (colour[v] == colour[u]) {
          bipartite = false;
        }
      }
    }
  }
  if (!bipartite || side[0] == 0 || side[1] == 0) return;
  const int servers = side[0] < side[1] ? 0 : 1;
  // Servers: at most half as many as workers, at least three workers, and every
  // worker exchanging with every server. A three-stage pipeline (two ends around
  // a middle) or a parameter server with two workers cannot be told apart from
  // the traffic's shape: those stay workers unless TW_ROLE says otherwise.
  if (2 * side[servers] > side[1 - servers] || side[1 - servers] < 3) return;
  for (std::size_t r = 0; r < n; ++r) {
    if (colour[r] == servers && adj[r].size() != side[1 - servers]) return;
    if (colour[r] == 1 - servers && adj[r].size() != side[servers]) return;
  }
  for (std::size_t r = 0; r < n; ++r) {
    if (!ranks.ranks[r].role_how.empty() || colour[r] == -1) continue;
    ranks.ranks[r].role = colour[r] == servers ? Role::server : Role::worker;
    ranks.ranks[r].role_how = "traffic";
  }
}

}  // namespace tw::build

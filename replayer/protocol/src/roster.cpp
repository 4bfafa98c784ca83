#include "tensorwire/protocol/roster.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <stdexcept>


#include "tensorwire/core/yaml_reader.hpp"

namespace tw {
namespace {

class RosterReader : public YamlReader {
 public:
  using YamlReader::YamlReader;

  Roster read() {
    Roster r;
    const Node& root = doc_.root();
    const auto f = fields(root, "the roster", {"token", "ranks"}, {"ranks"});
    if (root.kind != Kind::map) return r;
    if (auto t = string_field(f[0], "the roster", "token")) {
      if (t->size() > 256) error(*f[0], "the roster: 'token' is longer than 256 bytes");
      r.token = *t;
    }
    const auto items = list(f[1], "'ranks'");
    r.ranks.resize(items.size());
    std::vector<bool> seen(items.size(), false);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const What what("roster entry", i);
      const auto g = fields(items[i], what, {"rank", "host", "port"}, {"rank", "host", "port"});
      const auto rank = uint_field(g[0], what, "rank", 0, 65535);
      const auto host = string_field(g[1], what, "host");
      const auto port = uint_field(g[2], what, "port", 1, 65535);
      if (!rank || !host || !port) continue;
      if (*rank >= items.size()) {
        error(*g[0], "roster: rank " + std::to_string(*rank) + " is out of range: " + std::to_string(items.size()) +
                         " ranks are numbered 0 to " + std::to_string(items.size() - 1));
        continue;
      }
      if (seen[*rank]) {
        error(*g[0], "roster: rank " + std::to_string(*rank) + " is listed twice");
        continue;
      }
      if (host->empty()) {
        error(*g[1], "roster: rank " + std::to_string(*rank) + " has an empty host");
        continue;
      }
      seen[*rank] = true;
      r.ranks[*rank] = {static_cast<std::uint32_t>(*rank), *host, static_cast<std::uint16_t>(*port)};
    }
    return r;
  }
};

}  // namespace

Roster parse_roster(const std::string& text, const std::string& file) { return read_yaml_or_throw<RosterReader>(text, file); }

Roster load_roster(const std::string& path) { return parse_roster(read_text_file(path), path); }

std::string write_roster(const Roster& roster) {
  std::string out = "# tensorwire roster: where each rank's agent listens\n";
  if (!roster.token.empty()) out += "token: \"" + roster.token + "\"\n";
  out += "ranks:\n";
  for (const auto& e : roster.ranks) {
    out += "  - {rank: " + std::to_string(e.rank) + ", host: \"" + e.host + "\", port: " + std::to_string(e.port) + "}\n";
  }
  return out;
}

Roster roster_by_rank(const std::vector<RosterEntry>& entries, const Profile& profile, RankId self, std::string token) {
  const std::size_t ranks = profile.ranks.size();
  Roster out;
  out.token = std::move(token);
  out.ranks.resize(ranks);
  for (std::size_t r = 0; r < ranks; ++r) out.ranks[r].rank = static_cast<std::uint32_t>(r);
  std::vector<bool> listed(ranks, false);
  for (const RosterEntry& e : entries) {
    if (e.rank >= ranks) {
      throw std::runtime_error("the roster lists rank " + std::to_string(e.rank) + ", beyond the profile's " + std::to_string(ranks) +
                               " ranks");
    }
    if (listed[e.rank]) throw std::runtime_error("the roster lists rank " + std::to_string(e.rank) + " twice");
    listed[e.rank] = true;
    out.ranks[e.rank] = e;
  }
  const auto need = [&](RankId r) {
    if (r >= ranks || !listed[r]) throw std::runtime_error("the roster has no address for rank " + std::to_string(r));
  };
  need(self);
  for (const Flow& f : profile.flows) {
    need(f.src);
    need(f.dst);
  }
  return out;
}

namespace {
bool loopback_host(const std::string& h) {
  if (h == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}
}  // namespace

std::size_t ranks_on_host(const Roster& roster, RankId rank) {
  if (rank >= roster.ranks.size() || roster.ranks[rank].host.empty()) return 1;
  const std::string& mine = roster.ranks[rank].host;
  std::size_t n = 0;
  for (const RosterEntry& e : roster.ranks) {
    if (e.host == mine || (loopback_host(e.host) && loopback_host(mine))) ++n;
  }
  return std::max<std::size_t>(1, n);
}

}  // namespace tw

// Where each rank's agent listens, and the run's token: the hand-made (or
// `replay --local`-made) set-up of agents that run without a controller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorwire/core/diagnostic.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

struct RosterEntry {
  std::uint32_t rank = 0;
  std::string host;
  std::uint16_t port = 0;
};

struct Roster {
  std::string token;  // may be empty: then agents accept any peer that knows the profile
  std::vector<RosterEntry> ranks;  // ranks[i].rank == i
};

// Parses a roster file:
//   token: "..."                          # optional
//   ranks:
//     - {rank: 0, host: 127.0.0.1, port: 17000}
// Throws InputError ("file:line:col: reason") on problems, std::runtime_error if
// the file cannot be read.
Roster load_roster(const std::string& path);
Roster parse_roster(const std::string& text, const std::string& file);
std::string write_roster(const Roster& roster);

// The roster of an agent that was sent only its own entry and its peers' (a
// controller's setup): by rank (ranks[i].rank == i) for every rank of
// `profile`, the others without an address. Throws std::runtime_error if an
// entry is listed twice or beyond the profile's ranks, or if `self` or a rank of
// one of the profile's flows has no entry.
Roster roster_by_rank(const std::vector<RosterEntry>& entries, const Profile& profile, RankId self, std::string token);

// How many of the roster's ranks are on `rank`'s host, itself included: those
// with the same host, every loopback address (127.0.0.0/8, ::1, localhost)
// counting as one. 1 when `rank` is not listed or has no address. Agents on
// network namespaces of one machine have hosts of their own: this cannot tell.
std::size_t ranks_on_host(const Roster& roster, RankId rank);

}  // namespace tw

// Where each rank's agent listens, and the run's token: the hand-made (or
// `replay --local`-made) set-up of agents that run without a controller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorwire/core/diagnostic.hpp"

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

}  // namespace tw

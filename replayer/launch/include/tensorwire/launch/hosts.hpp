// Host lists for `run --hosts`: parsing and the rank placement. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tw {

// One entry of --hosts: "user@host:slots" (slots default 1).
struct HostSlots {
  std::string target;  // what ssh is given: "user@host" or "host"
  std::string host;    // the host part alone
  std::uint32_t slots = 1;
};

// Parses a comma-separated host list; throws std::invalid_argument naming the
// bad entry.
std::vector<HostSlots> parse_host_list(const std::string& text);

// The rank -> host placement: ranks fill the hosts in order, slots at a time.
// Throws std::invalid_argument when the slots do not cover `ranks`.
std::vector<std::size_t> place_ranks(const std::vector<HostSlots>& hosts, std::size_t ranks);

bool is_loopback_host(const std::string& host);

}  // namespace tw

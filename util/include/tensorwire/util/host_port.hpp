// "host:port" (or "[v6]:port") as given on a command line (--listen,
// --controller, --data-host), split into its parts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace tw {

// Throws std::invalid_argument naming `what` (the option) on bad input.
std::pair<std::string, std::uint16_t> split_host_port(const std::string& text, const std::string& what);

}  // namespace tw

// A data socket's TCP congestion control (TCP_CONGESTION). A replay may choose
// one for every flow (--congestion-control) instead of each host's default: the
// algorithm decides how a sender spreads its bytes in time (cubic sends in
// bursts, BBR paces), and so how the replayed traffic meets the network.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace tw {

// The longest name the kernel takes (TCP_CA_NAME_MAX, 16 with its terminator).
inline constexpr std::size_t kMostCongestionName = 15;

// Empty when `name` could be an algorithm's name (1 to 15 of [A-Za-z0-9_-]),
// otherwise why not.
std::string congestion_name_problem(const std::string& name);

// The socket's algorithm; nullopt when it cannot say (not TCP).
std::optional<std::string> congestion_control(int fd);

// Sets the socket's algorithm. Empty when done, otherwise one line saying why
// not: not available on this host (with the ones that are), or not allowed to
// this process (net.ipv4.tcp_allowed_congestion_control, without CAP_NET_ADMIN).
std::string set_congestion_control(int fd, const std::string& name);

// The algorithm a new TCP socket of this process would use after `name` (empty:
// the host's default) is set on it: checks once, before any flow connects, that
// the run's choice is possible here. Throws std::runtime_error with the reason.
std::string probe_congestion_control(const std::string& name);

// Whether the algorithm paces its sender (the BBR family): its bytes arrive
// spread in time rather than in bursts.
bool paces(const std::string& name);

}  // namespace tw

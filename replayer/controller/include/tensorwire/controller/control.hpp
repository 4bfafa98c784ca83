// The control plane between the controller and its agents: JSON text messages
// (and binary frames for result files) over one WebSocket per agent, which the
// agent opens to ws://CONTROLLER/agent presenting the run's token as
// "Authorization: Bearer TOKEN". docs/protocol.md lists every message.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

inline constexpr int kControlVersion = 1;
inline constexpr const char* kAgentPath = "/agent";
inline constexpr Nanos kHeartbeatTimeout = 1800 * kMilli;  // silence after which a peer is gone

// How every agent of a run replays; the controller sends it with the profile.
struct RunSettings {
  std::uint64_t iterations = 0;  // 0: the profile's
  bool open_loop = false;
  // Open loop: each op's offset within an iteration (indexed like the profile's
  // ops) and the period, planned by the controller (from observed timings or the
  // timing model), so agents need no observed data.
  std::vector<Nanos> open_loop_offsets;
  Nanos open_loop_period = 0;
  Nanos spin = 0;
  Nanos delay = 0;
  bool tx_timestamps = true;
  Nanos connect_timeout = 30 * kSecond;
  Nanos idle_timeout = 60 * kSecond;
};

nlohmann::json to_json(const RunSettings& s);
// Throws std::runtime_error naming the field on a missing or mistyped one.
RunSettings run_settings_from_json(const nlohmann::json& j);

// The executor options of one rank under these settings.
ExecutorOptions executor_options_for(const RunSettings& s, double slowdown);

// Parses one control message: a JSON object with a string "type". Throws
// std::runtime_error with a short reason otherwise.
nlohmann::json parse_control_message(const std::string& text);

// Compares tokens in constant time in their content, so that a token cannot be
// guessed byte by byte from response times.
bool same_token(const std::string& a, const std::string& b);

// CLOCK_REALTIME in nanoseconds: the clock every record and message uses.
Nanos realtime_ns();

// A random token of 32 hex digits (128 bits from getrandom).
std::string random_token();

// "host:port" (or "[v6]:port") split; throws std::invalid_argument on bad input.
std::pair<std::string, std::uint16_t> split_host_port(const std::string& text, const std::string& what);

}  // namespace tw

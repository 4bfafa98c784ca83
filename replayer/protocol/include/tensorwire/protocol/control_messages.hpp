// The control plane between the controller and its agents, as typed messages:
// JSON text frames with a "type" over one WebSocket per agent (result files
// follow a `file` message as binary frames). docs/protocol.md is the reference;
// this is its one encoder and decoder. Pure: no I/O, any thread.
//
// Decoding checks the whole message (its type, every field's presence and type)
// and never throws: a malformed message yields a one-line reason, worded to
// follow "sent " ("an unknown message \"x\"", "a \"pong\" whose \"t\" is missing").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/protocol/roster.hpp"
#include "tensorwire/protocol/run_settings.hpp"

namespace tw {

// 2: `setup` carries the data flows' own token (data_token).
// 3: `setup` carries the rank's slice of the profile, with the whole profile's
//    op indices and digest.
// 4: the slice holds only the rank's own flows (`flows`: the whole profile's
//    indices); the roster only the rank and its peers; `delay_from_ns` is
//    [[source rank, ns], ...].
// 5: `settings.io_threads` may be 0 (the agent chooses), with
//    `settings.machine_agents`.
inline constexpr int kControlVersion = 5;
inline constexpr const char* kAgentPath = "/agent";
inline constexpr Nanos kHeartbeatTimeout = 1800 * kMilli;  // silence after which a peer is gone
// The largest WebSocket message each side reads. An agent sends JSON messages of
// a few kB and its result files in 1 MiB pieces; a dashboard's feed sends
// nothing the controller needs; the controller sends the whole profile in its
// setup, which may be large, and is trusted with the run's token.
inline constexpr std::uint64_t kMaxAgentMessage = 16ull << 20;
inline constexpr std::uint64_t kMaxFeedMessage = 64ull << 10;
inline constexpr std::uint64_t kMaxControllerMessage = 1ull << 30;

namespace control {

// ---- agent to controller --------------------------------------------------------

struct Hello {
  static constexpr const char* kType = "hello";
  int version = kControlVersion;  // missing on the wire: 0, which no controller speaks
  std::string host = "?";
  long pid = 0;
  std::string data_host;  // where the agent already listens for data flows
  std::uint16_t data_port = 0;
  std::optional<RankId> rank_hint;  // the launcher's placement
  bool operator==(const Hello&) const = default;
};

struct Connected {
  static constexpr const char* kType = "connected";
  bool operator==(const Connected&) const = default;
};

struct Pong {
  static constexpr const char* kType = "pong";
  std::uint64_t seq = 0;
  Nanos t = 0;  // the agent's CLOCK_REALTIME when it read the ping
  bool operator==(const Pong&) const = default;
};

struct IterationSpan {
  std::uint64_t index = 0;
  Nanos start = 0, end = 0;  // agent clock
  bool operator==(const IterationSpan&) const = default;
};

struct FlowBytes {
  std::size_t flow = 0;
  std::uint64_t bytes = 0;  // sent so far
  bool operator==(const FlowBytes&) const = default;
};

struct Progress {
  static constexpr const char* kType = "progress";
  std::vector<IterationSpan> iterations;
  std::vector<FlowBytes> flows;
  bool operator==(const Progress&) const = default;
};

struct Done {
  static constexpr const char* kType = "done";
  bool ok = false;
  std::string error;  // empty when ok
  bool operator==(const Done&) const = default;
};

// Announces a result file; `size` bytes follow in binary frames.
struct FileBegin {
  static constexpr const char* kType = "file";
  std::string name;
  std::uint64_t size = 0;
  bool operator==(const FileBegin&) const = default;
};

struct Uploaded {
  static constexpr const char* kType = "uploaded";
  bool operator==(const Uploaded&) const = default;
};

// ---- controller to agent --------------------------------------------------------

struct Setup {
  static constexpr const char* kType = "setup";
  std::string run;
  RankId rank = 0;
  // YAML text, without observed timings: the rank's slice (profile_slice.hpp),
  // its ops being the whole profile's `ops` (runs of indices {first, count}) of
  // `profile_ops`, its flows the whole's `flows` of `profile_flows`; the whole's
  // digest is `profile_digest`.
  std::string profile;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ops;
  std::uint64_t profile_ops = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> flows;
  std::uint64_t profile_flows = 0;
  std::uint64_t profile_digest = 0;
  // Where the rank itself and the peers of its flows listen: only those, so that
  // a setup's size does not grow with the ranks the agent never talks to.
  std::vector<RosterEntry> roster;
  RunSettings settings;
  double slowdown = 1;
  std::vector<std::pair<RankId, Nanos>> delay_from;  // emulated delay per source rank; absent: none
  // What peers present on data flows: the run's own, never the control plane's
  // token (data flows are plain TCP even when the control plane is TLS).
  std::string data_token;
  bool operator==(const Setup& o) const;
};

struct Ping {
  static constexpr const char* kType = "ping";
  std::uint64_t seq = 0;
  bool operator==(const Ping&) const = default;
};

struct Start {
  static constexpr const char* kType = "start";
  Nanos at = 0;  // CLOCK_REALTIME on the agent's clock
  bool operator==(const Start&) const = default;
};

struct Stop {
  static constexpr const char* kType = "stop";
  std::string reason = "no reason given";
  bool operator==(const Stop&) const = default;
};

struct Bye {
  static constexpr const char* kType = "bye";
  bool operator==(const Bye&) const = default;
};

}  // namespace control

using AgentMessage = std::variant<control::Hello, control::Connected, control::Pong, control::Progress, control::Done,
                                  control::FileBegin, control::Uploaded>;
using ControllerMessage = std::variant<control::Setup, control::Ping, control::Start, control::Stop, control::Bye>;

// A decoded message, or why the text is not one.
template <typename Message>
struct Decoded {
  std::optional<Message> message;
  std::string error;  // one line, when !message
  explicit operator bool() const { return message.has_value(); }
};

std::string encode(const AgentMessage& m);
std::string encode(const ControllerMessage& m);

Decoded<AgentMessage> decode_agent_message(std::string_view text);
Decoded<ControllerMessage> decode_controller_message(std::string_view text);

}  // namespace tw

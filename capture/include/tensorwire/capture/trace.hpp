// Reading a capture directory back, and making sense of it: processes, their TCP
// connections (paired across processes by their addresses), and messages.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/capture/trace_format.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

struct ProcessTrace {
  std::string file;  // the .twt
  int pid = 0, ppid = 0;
  std::string host;
  std::vector<std::string> cmdline;
  std::map<std::string, std::string> env;  // RANK, WORLD_SIZE, ... as the process had them
  bool final = false;  // the process exited through exit() or _exit() and flushed
  std::uint64_t events_written = 0, events_dropped = 0, untracked = 0;
  std::string wire;
  std::vector<trace::Event> io;  // send, recv, connect, accept, close, shutdown
  std::vector<trace::ConnEvent> conns;
  std::vector<trace::TcpInfoEvent> tcp_info;
  std::string rank_text() const;  // "rank 1", or "" when unknown
};

// Reads every trace-PID.json/.twt pair in `dir`; throws std::runtime_error naming
// the file on a bad header or a truncated event (a partial last event of a
// process that was killed is dropped and counted in `events_dropped`).
std::vector<ProcessTrace> read_capture_dir(const std::string& dir);

struct Endpoint {
  std::string address;  // "10.0.0.1:5000" or "[::1]:5000"
  bool operator==(const Endpoint&) const = default;
};

struct Connection {
  std::size_t process = 0;  // index into the traces
  std::uint32_t id = 0;
  Endpoint local, remote;
  std::string how;  // connect, accept, in use
  std::string role;  // "store" (the rendezvous at MASTER_PORT) or "data"
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  std::uint64_t send_calls = 0, recv_calls = 0, failed_calls = 0;
  std::optional<std::size_t> peer;  // the same connection seen from the other end (index into connections)
};

// A logical message: consecutive send calls on one connection with less than
// `gap` between one call's return and the next call (docs/trace-format.md).
struct Message {
  std::size_t connection = 0;
  std::uint64_t begin = 0, end = 0;  // stream offsets
  std::uint32_t calls = 0;
  Nanos ready = 0;     // the first call entered
  Nanos sent_app = 0;  // the last call returned
  Nanos recv_first = -1, recv_last = -1;  // the receiving process got its first / last byte (if traced)
};

struct CaptureAnalysis {
  std::vector<Connection> connections;
  std::vector<Message> messages;  // by connection, in stream order
};

CaptureAnalysis analyse_capture(const std::vector<ProcessTrace>& traces, Nanos gap = 100 * kMicro);

}  // namespace tw

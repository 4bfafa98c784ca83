// Reading a capture directory back, and making sense of it: processes, their TCP
// connections (paired across processes by their addresses), and messages.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/capture/trace_format.hpp"
#include "tensorwire/capture/wire.hpp"
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
  std::vector<trace::MarkEvent> marks;  // framework annotations, in time order
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
  // The wire tap: whether this direction's SYN was seen (so segments map onto the
  // stream), stream bytes seen on the wire, segments that carried bytes again.
  bool on_wire = false;
  std::uint64_t wire_bytes = 0;
  std::uint32_t retransmits = 0;
  std::uint64_t retransmitted_bytes = 0;
  // The kernel's count (TCP_INFO total_retrans at the last snapshot; in MSS-sized
  // segments, and including copies a local qdisc dropped before the wire).
  std::uint32_t kernel_retransmits = 0;
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
  // From the wire tap (-1 without it): first segment with its bytes seen, the
  // segment with its last byte first seen, the ACK covering its last byte seen.
  Nanos wire_first = -1, wire_last = -1, acked = -1;
  std::uint32_t retransmits = 0;
};

struct CaptureAnalysis {
  std::vector<Connection> connections;
  std::vector<Message> messages;  // by connection, in stream order
};

// The wire tap's part of a capture directory: capture.json's "wire" block and the
// wire-*.pcap files.
struct WireCapture {
  std::string mode = "none";  // auto, an interface list, off; none: no capture.json
  std::string status;         // "" when it ran through; otherwise why there is no (complete) wire data
  std::vector<std::string> interfaces;
  std::uint64_t frames = 0, dropped = 0;  // frames in the files; lost in the kernel
  bool truncated = false;                 // a file's last record was cut
  wire::WireIndex index;
  bool present() const { return !interfaces.empty(); }
};
WireCapture read_wire_capture(const std::string& dir);

CaptureAnalysis analyse_capture(const std::vector<ProcessTrace>& traces, Nanos gap = 100 * kMicro,
                                const wire::WireIndex* wire = nullptr);

}  // namespace tw

// Reading a capture directory back, and making sense of it: processes, their TCP
// connections (paired across processes by their addresses), and messages.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/time_span.hpp"
#include "tensorwire/core/trace_format.hpp"
#include "tensorwire/core/wire.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

struct ProcessTrace {
  std::string file;  // the .twt
  int pid = 0, ppid = 0;
  std::string host;
  std::vector<std::string> cmdline;
  std::map<std::string, std::string> env;  // RANK, WORLD_SIZE, ... as the process had them
  bool final = false;  // the process exited through exit() or _exit() and flushed
  std::uint64_t events_missing = 0;  // events the description says were written that the file lacks (cut short)
  std::uint64_t events_written = 0, events_dropped = 0, untracked = 0;
  std::string wire;
  std::vector<trace::Event> io;  // send, recv, connect, accept, close, shutdown
  std::vector<trace::ConnEvent> conns;
  std::vector<trace::TcpInfoEvent> tcp_info;
  std::vector<trace::MarkEvent> marks;  // framework annotations, in time order
  std::vector<trace::SampleEvent> samples;  // framing bytes of send calls, in file order
  std::string rank_text() const;  // "rank 1", or "" when unknown
  std::size_t event_count() const { return io.size() + conns.size() + tcp_info.size() + marks.size() + samples.size(); }
};

// When the records of a capture directory (trace events, wire frames) can have
// happened: no earlier than an hour before its first session started, and no
// later than an hour after they are read (a job's daemons outlive the capture and
// keep writing; a realtime clock steps). A session file that is not yet written
// (a capture sharing the directory claims its file first), or that does not say
// when it started, bounds nothing here; the wire reader reports what is wrong
// with it. Without a session, any time from 0. Throws std::runtime_error when
// `dir` cannot be listed.
TimeSpan capture_span(const std::string& dir);

// Reads every trace-PID.json/.twt pair in `dir`; throws std::runtime_error naming
// the file on a bad header, a truncated event (a partial last event of a process
// that was killed is dropped and counted in `events_dropped`), or an event
// outside capture_span(dir).
std::vector<ProcessTrace> read_capture_dir(const std::string& dir);

struct Endpoint {
  std::string address;  // "10.0.0.1:5000" or "[::1]:5000"
  bool operator==(const Endpoint&) const = default;
};

// What a connection carries, as far as the capture can tell.
enum class ConnectionRole : std::uint8_t {
  data,   // the job's own traffic
  store,  // the rendezvous store (a connection to or from MASTER_PORT)
};

const char* origin_name(trace::ConnOrigin o);  // "connect", "accept", "in use"
const char* role_name(ConnectionRole r);       // "data", "store"
// In JSON, both are their names.
inline void to_json(nlohmann::json& j, ConnectionRole r) { j = role_name(r); }
namespace trace {
inline void to_json(nlohmann::json& j, ConnOrigin o) { j = origin_name(o); }
}  // namespace trace

struct Connection {
  std::size_t process = 0;  // index into the traces
  std::uint32_t id = 0;
  Endpoint local, remote;
  trace::ConnOrigin how = trace::ConnOrigin::in_use;
  ConnectionRole role = ConnectionRole::data;
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
  // The framing its sent bytes were decoded with ("gloo", "zmtp", "openmpi",
  // "tensorwire"), or "" when messages were delimited by timing; and the stream
  // offset up to which they were decoded (the rest by timing), with why not further.
  std::string transport;
  std::uint64_t decoded_until = 0;
  std::string decode_note;
};

// A logical message: one framework transfer when the connection's framing was
// decoded (core/framing.hpp), otherwise a run of send calls on one connection.
// Without framing, the next call continues the message when the previous one wrote only part of what it was
// asked (the rest follows), or when the previous one was small (a header, a
// framework's request fields) and the next began within `gap` of its return. A
// complete write of kSmallCall bytes or more ends a message (docs/trace-format.md).
inline constexpr std::uint64_t kSmallCall = 16 * 1024;
bool continues(const trace::Event& prev, const trace::Event& next, Nanos gap);

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
  // From the job's annotations (-1 without): the sending process's iteration
  // whose span holds `ready`, and the DDP bucket being reduced then (index into
  // CaptureAnalysis::spans).
  std::int64_t iteration = -1;
  std::int64_t bucket_span = -1;
  // From the transport's framing: a notification, handshake or command rather
  // than a transfer of application bytes (false when delimited by timing).
  bool control = false;
};

// A span the job annotated (python/tensorwire/annotate.py), begin and end paired.
struct AnnotatedSpan {
  std::size_t process = 0;
  trace::MarkType type = trace::MarkType::span;
  std::string name;
  std::int64_t value = 0;  // iteration: its number; bucket: bytes
  std::uint32_t aux = 0;   // bucket: index
  Nanos begin = 0, end = -1;  // end -1: never closed; an instant has end == begin
};

struct CaptureAnalysis {
  std::vector<Connection> connections;
  std::vector<Message> messages;  // by connection, in stream order
  std::vector<AnnotatedSpan> spans;  // by process, then begin
  // Per connection: the stream offsets at which its send calls began, ascending.
  // Every message starts at one; a framework writes a transfer from its start, so
  // these recur from iteration to iteration even where messages are grouped
  // differently.
  std::vector<std::vector<std::uint64_t>> call_offsets;
};

// Pairs each process's annotation marks into spans (by type, thread and name;
// buckets by index, as a bucket's end comes from another thread).
std::vector<AnnotatedSpan> annotated_spans(const std::vector<ProcessTrace>& traces);
const char* mark_type_name(trace::MarkType t);

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
// The wire taps of several directories in one index, each session's times less
// its host's offset in `shift_by_host` (none for a host not in it): the captures
// of one job on several hosts, on one clock.
WireCapture read_wire_captures(const std::vector<std::string>& dirs, const std::map<std::string, Nanos>& shift_by_host);

CaptureAnalysis analyse_capture(const std::vector<ProcessTrace>& traces, Nanos gap = 100 * kMicro,
                                const wire::WireIndex* wire = nullptr);

}  // namespace tw

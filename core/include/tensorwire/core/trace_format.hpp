// The capture's trace files: one binary file of fixed 64-byte events per process
// (trace-PID.twt), next to a JSON description of the process (trace-PID.json).
// docs/trace-format.md is the reference. Shared by the shim (which writes) and
// the readers; no dependencies beyond the C++ standard library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw::trace {

inline constexpr char kMagic[8] = {'T', 'W', 'T', 'R', 'A', 'C', 'E', '1'};
inline constexpr std::uint32_t kVersion = 1;

enum class Kind : std::uint8_t {
  send = 1,      // a send call on a TCP socket: bytes moved = result
  recv = 2,      // a receive call
  connect = 3,   // connect(): result, errno
  accept = 4,    // accept()/accept4(): result is the new fd
  close = 5,     // close() of a TCP socket
  shutdown = 6,  // shutdown(): how in `requested`
  conn = 7,      // a TCP connection's addresses, first seen (ConnEvent layout)
  tcp_info = 8,  // TCP_INFO at a send call (TcpInfoEvent layout)
  mark = 9,      // a framework annotation (MarkEvent layout)
  sample = 10,   // the first and last bytes a send call moved (SampleEvent layout)
};

// Which call produced a send or recv event.
enum class Call : std::uint16_t {
  write = 1, writev, send, sendto, sendmsg, sendmmsg,
  read = 11, readv, recv, recvfrom, recvmsg,
  other = 99
};

inline constexpr std::uint8_t kFlagError = 1;  // result < 0; errno in `err`
inline constexpr std::uint8_t kFlagPeek = 2;   // MSG_PEEK: the stream did not advance

struct Event {
  Kind kind;
  std::uint8_t flags;
  Call call;
  std::int32_t fd;
  std::uint32_t conn;  // connection id within the process (0: none)
  std::uint32_t tid;
  std::int64_t enter_ns;  // CLOCK_REALTIME when the call was entered
  std::int64_t exit_ns;   // and when it returned
  std::int64_t result;
  std::int32_t err;
  std::uint32_t reserved;
  std::uint64_t offset;     // stream offset of the first byte moved (send: sent stream, recv: received stream)
  std::uint64_t requested;  // bytes the call asked to move (shutdown: how)
};
static_assert(sizeof(Event) == 64);

// How the shim learnt of a connection (ConnEvent::how).
enum class ConnOrigin : std::uint8_t {
  unknown = 0,  // not yet known (the shim's "as connect/accept left it")
  connect = 1,  // connect() seen, blocking or not
  accept = 2,   // accept()/accept4() returned it
  in_use = 3,   // first seen in a data call: opened before the shim was loaded, or through a call it does not wrap
};

struct ConnEvent {
  Kind kind;  // conn
  std::uint8_t flags;
  std::uint16_t family;  // AF_INET or AF_INET6
  std::int32_t fd;
  std::uint32_t conn;
  std::uint32_t tid;
  std::int64_t at_ns;
  std::uint8_t local[16];  // IPv4 in the first 4 bytes
  std::uint8_t remote[16];
  std::uint16_t local_port;  // host order
  std::uint16_t remote_port;
  ConnOrigin how;
  std::uint8_t pad[3];
};
static_assert(sizeof(ConnEvent) == 64);

struct TcpInfoEvent {
  Kind kind;  // tcp_info
  std::uint8_t flags;
  std::uint16_t pad0;
  std::int32_t fd;
  std::uint32_t conn;
  std::uint32_t tid;
  std::int64_t at_ns;
  std::uint32_t notsent_bytes;
  std::uint32_t unacked;  // segments
  std::uint32_t snd_cwnd;
  std::uint32_t rtt_us;
  std::uint32_t total_retrans;
  // Cumulative microseconds, modulo 2^32 (difference consecutive snapshots).
  std::uint32_t busy_us;
  std::uint32_t rwnd_limited_us;
  std::uint32_t sndbuf_limited_us;
  std::uint64_t bytes_acked;
};
static_assert(sizeof(TcpInfoEvent) == 64);

// What an annotation marks (tensorwire_annotate's `type`).
enum class MarkType : std::uint16_t {
  iteration = 1,  // value: the iteration number
  forward = 2,
  backward = 3,
  optimizer = 4,
  bucket = 5,  // DDP gradient bucket: begin = ready (all-reduce starts), end = reduced; aux: index, value: bytes
  span = 6,    // anything else the job names
};

struct MarkEvent {
  Kind kind;  // mark
  char phase;  // 'B' begin, 'E' end, 'I' instant
  MarkType type;
  std::uint32_t aux;
  std::uint32_t tid;
  std::uint32_t reserved;
  std::int64_t at_ns;
  std::int64_t value;
  char name[32];  // NUL-padded; cut at 31 bytes
};
static_assert(sizeof(MarkEvent) == 64);

// The bytes at both ends of a send call's data, so that a transport's framing
// (Gloo's op preambles, ZeroMQ's frame headers, OpenMPI's fragment headers) can be
// decoded to delimit messages exactly. Written after the call's send event, for a
// call that moved at least one byte; matched to it by (conn, offset). `head` holds
// the call's first head_len bytes, `tail` its last tail_len bytes, never overlapping
// the head (tail_len = min(16, result - head_len)). docs/trace-format.md says what
// this keeps of a job's data and how to turn it off.
inline constexpr std::size_t kSampleHead = 32;
inline constexpr std::size_t kSampleTail = 16;
struct SampleEvent {
  Kind kind;  // sample
  std::uint8_t head_len;
  std::uint8_t tail_len;
  std::uint8_t pad;
  std::uint32_t conn;
  std::uint64_t offset;  // stream offset of the call's first byte, as in its send event
  std::uint8_t head[kSampleHead];
  std::uint8_t tail[kSampleTail];
};
static_assert(sizeof(SampleEvent) == 64);

}  // namespace tw::trace

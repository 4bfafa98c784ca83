// Message boundaries from a transport's own framing. The capture keeps the first
// and last bytes of every send call (trace::SampleEvent); where a connection
// speaks a framing we know (Gloo's pair protocol, ZeroMQ's ZMTP, OpenMPI's TCP
// BTL with the ob1 PML, tensorwire's data plane), its headers are found in those
// bytes and walked header to header, so a message is one framework transfer,
// the same every time the job runs. Where a header the walk needs was not
// sampled, the walk stops there and says why; the caller delimits the rest by
// timing. docs/profile-build.md ("Delimiting messages") is the reference.
// Pure code: no I/O. Robust to arbitrary bytes: every loop is bounded by the
// sampled bytes, nothing is allocated in proportion to a length field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorwire/core/trace_format.hpp"

namespace tw::framing {

// What is known of one direction of a connection: the bytes that were sampled,
// by stream offset; the bytes in between are unknown. Memory is the bytes added
// plus 24 bytes per piece (bytes that continue the last piece added extend it).
// Adds in stream order are cheapest; out of order they cost a move of the pieces
// after them.
class SparseBytes {
 public:
  // Records n bytes at stream offset `offset`. Where bytes at an offset are
  // already known, the first recorded stay. Bytes at offset 2^64 - 1 and beyond are dropped.
  void add(std::uint64_t offset, const std::uint8_t* bytes, std::size_t n);
  // Records a send call's sample: its head at s.offset and its tail ending at
  // s.offset + call_bytes (call_bytes: the bytes the call moved, its send
  // event's result). Returns false, and records nothing, for a sample whose
  // lengths cannot belong to such a call.
  bool add_sample(const trace::SampleEvent& s, std::uint64_t call_bytes);

  // The n bytes at `offset`, or nothing unless every one of them was recorded.
  std::optional<std::vector<std::uint8_t>> read(std::uint64_t offset, std::size_t n) const;
  // The same into `out` without allocating: true when all out.size() bytes were known.
  bool read_into(std::uint64_t offset, std::span<std::uint8_t> out) const;

  std::size_t bytes() const { return pool_.size(); }
  std::size_t pieces() const { return pieces_.size(); }

 private:
  struct Piece {
    std::uint64_t offset;  // stream offset of its first byte
    std::uint64_t at;      // where its bytes start in pool_
    std::uint32_t size;
  };
  std::vector<Piece> pieces_;  // disjoint, sorted by offset
  std::vector<std::uint8_t> pool_;
};

// One direction of a connection as a process's trace holds it: the samples of
// its send calls on `conn`, each placed by the send event it belongs to (same
// conn and offset; the event's result says where the call's tail ends), and the
// stream's end (the end of its last send).
struct SentStream {
  SparseBytes bytes;
  std::uint64_t end = 0;
  std::size_t unmatched = 0;  // samples without a send event, or whose lengths do not fit it: left out
};
SentStream sent_stream(std::span<const trace::Event> io, std::span<const trace::SampleEvent> samples, std::uint32_t conn);

enum class Transport { unknown, gloo, zmtp, openmpi, tensorwire };
const char* transport_name(Transport t);

enum class MessageKind {
  data,     // a framework transfer carrying application bytes (a tensor, a ZeroMQ message, an MPI message)
  control,  // a notification, a handshake, a ZMTP command, an MPI ACK/FIN, ...
};
const char* kind_name(MessageKind k);

struct DecodedMessage {
  std::uint64_t begin = 0;  // stream offset of the first byte
  std::uint64_t end = 0;    // one past the last byte
  MessageKind kind = MessageKind::data;
  const char* what = "";    // static label: "gloo send unbound buffer", "zmtp READY", "mpi rendezvous", ...
  std::uint64_t bytes = 0;  // end - begin
  std::uint32_t parts = 1;  // Gloo ops, ZMTP frames or BTL fragments it is made of
};

struct DecodedStream {
  Transport transport = Transport::unknown;
  // Sorted by begin. They cover [0, decoded_until) exactly, each byte in one
  // message.
  std::vector<DecodedMessage> messages;
  // Always a message boundary; == stream_end when the whole stream was decoded.
  std::uint64_t decoded_until = 0;
  std::string note;  // why decoding stopped early, or what was approximated; empty when exact to the end
};

// Detects which framing `sent` (one direction of a connection, stream_end bytes
// long) speaks and walks it. `received` is the other direction of the same
// connection when known: ZeroMQ chooses its encoder from the peer's greeting.
// Never throws on any bytes.
DecodedStream decode_stream(const SparseBytes& sent, std::uint64_t stream_end, const SparseBytes* received = nullptr);

}  // namespace tw::framing

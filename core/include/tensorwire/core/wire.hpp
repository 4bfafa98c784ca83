// The wire tap's side of a capture: TCP segment headers read back from the pcap
// files `tensorwire capture` writes (wire-IFACE.pcap), and the index that maps
// them onto a connection's stream offsets. Pure: parses bytes, no libpcap.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/time_span.hpp"
#include "tensorwire/core/units.hpp"

namespace tw::wire {

inline constexpr std::uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;

// One direction of a TCP connection: addresses as 16 bytes (IPv4 in the first 4,
// the rest zero; IPv4-mapped IPv6 addresses are folded to IPv4).
struct FlowKey {
  std::array<std::uint8_t, 16> src{}, dst{};
  std::uint16_t sport = 0, dport = 0;
  bool v6 = false;
  auto operator<=>(const FlowKey&) const = default;
  FlowKey reversed() const { return {dst, src, dport, sport, v6}; }
};

// Where the link layer says a frame went (Linux cooked captures only).
enum class Direction : std::uint8_t { unknown = 0, incoming = 1, outgoing = 2 };

struct Segment {
  Nanos ts = 0;
  FlowKey key;
  std::uint32_t seq = 0, ack = 0;
  std::uint32_t payload = 0;  // TCP payload bytes (from the IP length, not what was captured)
  std::uint8_t flags = 0;
  Direction direction = Direction::unknown;
  std::uint32_t source = 0;  // where it was seen: the capture file (high bits) and interface index (cooked v2)
};

// Parses one captured frame of link type `linktype` (pcap LINKTYPE_ values:
// 1 Ethernet, 113 Linux cooked v1, 276 v2, 101/228/229 raw IP). `wire_len` is the
// frame's original length. nullopt for anything that is not a TCP segment.
// Whether parse_frame reads frames of this link type at all.
bool known_linktype(std::uint32_t linktype);
std::optional<Segment> parse_frame(std::uint32_t linktype, const std::uint8_t* data, std::size_t caplen, std::size_t wire_len);

struct PcapRead {
  std::uint32_t linktype = 0;
  std::vector<Segment> segments;
  std::uint64_t frames = 0, other = 0;  // frames read; frames that were not TCP
  bool truncated = false;                // the last record was cut (the writer was killed)
};

// Reads a pcap file (micro- or nanosecond, either byte order). Throws
// std::runtime_error("PATH: reason") when it is not one, and
// "PATH: record N: reason" for a record no capture writes: a frame shorter than
// its link layer's header or with no byte kept (zeros where records belong read
// as such frames), or one stamped outside `span` (the capture's, where its
// session is known: capture_span()).
// `file` numbers the file's capture point in Segment::source.
PcapRead read_pcap(const std::string& path, std::uint32_t file = 0, const TimeSpan& span = {});

// Every frame of a pcap file as it was captured (to export it); returns the
// file's link type and whether its last record was cut. Throws as read_pcap.
struct RawFrame {
  Nanos ts = 0;
  std::uint32_t linktype = 0;  // the file's
  const std::uint8_t* data = nullptr;
  std::uint32_t caplen = 0, origlen = 0;
};
struct PcapInfo {
  std::uint32_t linktype = 0;
  bool truncated = false;
};
PcapInfo for_each_frame(const std::string& path, const std::function<void(const RawFrame&)>& f, const TimeSpan& span = {});

// A message's life on the wire, from the sender's stream offsets [begin, end).
struct WireTimes {
  Nanos wire_first = -1;  // the first segment carrying any of its bytes was seen
  Nanos wire_last = -1;   // all its bytes had been seen (-1: the tap missed some)
  Nanos acked = -1;       // the first ACK covering its last byte was seen
  std::uint32_t retransmits = 0;  // segments that carried its bytes again
};

// All segments of a capture, indexed by direction. The same bytes seen again
// within `kEcho` at another capture point (another file or interface) are one
// packet passing two points (a bridge and its port), not a retransmission.
class WireIndex {
 public:
  static constexpr Nanos kEcho = 200 * kMicro;

  void add(std::vector<Segment> segments);
  void finish();  // sorts by time; call once after the last add()

  // The stream of `key` that was opened (SYN or SYN-ACK sent in that direction)
  // last before `opened_by`: nullopt when no SYN was seen (the connection predates
  // the tap, or went over an interface it did not watch).
  class Stream;
  std::optional<Stream> stream(const FlowKey& key, Nanos opened_by) const;

  // Where that stream's offsets start: the sequence number of its offset 0, and
  // the session's span (from its SYN to the next SYN of the key, or for ever).
  struct Start {
    std::uint32_t seq0 = 0;
    Nanos opened = 0, until = 0;
  };
  std::optional<Start> stream_start(const FlowKey& key, Nanos opened_by) const;

  std::size_t segment_count() const { return count_; }

 private:
  std::map<FlowKey, std::vector<Segment>> by_key_;
  std::map<FlowKey, std::vector<std::size_t>> sessions_;  // per key: the SYNs in by_key_ that open a session
  std::size_t count_ = 0;
};

class WireIndex::Stream {
 public:
  WireTimes times(std::uint64_t begin, std::uint64_t end) const;
  std::uint64_t bytes_seen() const { return bytes_; }
  std::uint32_t retransmits() const { return static_cast<std::uint32_t>(retrans_.size()); }
  std::uint64_t retransmitted_bytes() const {
    std::uint64_t n = 0;
    for (const auto& r : retrans_) n += r.end - r.begin;
    return n;
  }

 private:
  friend class WireIndex;
  struct Span {
    std::uint64_t begin, end;  // stream offsets, first sighting of these bytes
    Nanos ts;
  };
  struct Ack {
    std::uint64_t acked;  // stream bytes acknowledged
    Nanos ts;
  };
  std::vector<Span> firsts_;   // by offset, disjoint: when each byte was first seen
  std::vector<Span> retrans_;  // segments that re-sent bytes, by offset
  std::vector<Ack> acks_;      // increasing
  std::uint64_t bytes_ = 0;
};

FlowKey flow_key(std::uint16_t family, const std::uint8_t* local, std::uint16_t local_port, const std::uint8_t* remote,
                 std::uint16_t remote_port);

}  // namespace tw::wire

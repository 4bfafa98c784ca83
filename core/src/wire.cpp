#include "tensorwire/core/wire.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <iterator>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "tensorwire/core/data_file.hpp"

namespace tw::wire {

namespace {

std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t be32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

bool v4_mapped(const std::uint8_t* a) {
  static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(a, prefix, 12) == 0;
}

// The IP packet at `ip` (`len` captured bytes, `wire_len` bytes on the wire).
std::optional<Segment> parse_ip(const std::uint8_t* ip, std::size_t len, std::size_t wire_len) {
  if (len < 1) return std::nullopt;
  Segment s;
  std::size_t hdr = 0, ip_payload = 0;
  const int version = ip[0] >> 4;
  if (version == 4) {
    if (len < 20) return std::nullopt;
    hdr = static_cast<std::size_t>(ip[0] & 0x0f) * 4;
    if (hdr < 20 || ip[9] != 6) return std::nullopt;
    if ((be16(ip + 6) & 0x1fff) != 0) return std::nullopt;  // a later fragment: no TCP header
    const std::size_t total = be16(ip + 2);
    // 0: a large GSO packet whose length does not fit; take the frame's.
    ip_payload = total >= hdr ? total - hdr : (wire_len > hdr ? wire_len - hdr : 0);
    std::memcpy(s.key.src.data(), ip + 12, 4);
    std::memcpy(s.key.dst.data(), ip + 16, 4);
  } else if (version == 6) {
    if (len < 40) return std::nullopt;
    std::size_t payload_len = be16(ip + 4);
    if (payload_len == 0) payload_len = wire_len > 40 ? wire_len - 40 : 0;  // jumbogram
    std::uint8_t next = ip[6];
    hdr = 40;
    while (next != 6) {
      if (next != 0 && next != 43 && next != 60 && next != 44) return std::nullopt;
      if (len < hdr + 8) return std::nullopt;
      const std::size_t ext = next == 44 ? 8 : (static_cast<std::size_t>(ip[hdr + 1]) + 1) * 8;
      if (next == 44 && (be16(ip + hdr + 2) & 0xfff8) != 0) return std::nullopt;  // later fragment
      next = ip[hdr];
      hdr += ext;
    }
    ip_payload = payload_len + 40 >= hdr ? payload_len + 40 - hdr : 0;
    if (v4_mapped(ip + 8) && v4_mapped(ip + 24)) {
      std::memcpy(s.key.src.data(), ip + 20, 4);
      std::memcpy(s.key.dst.data(), ip + 36, 4);
    } else {
      s.key.v6 = true;
      std::memcpy(s.key.src.data(), ip + 8, 16);
      std::memcpy(s.key.dst.data(), ip + 24, 16);
    }
  } else {
    return std::nullopt;
  }
  if (len < hdr + 14) return std::nullopt;
  const std::uint8_t* tcp = ip + hdr;
  const std::size_t doff = static_cast<std::size_t>(tcp[12] >> 4) * 4;
  if (doff < 20) return std::nullopt;
  s.key.sport = be16(tcp);
  s.key.dport = be16(tcp + 2);
  s.seq = be32(tcp + 4);
  s.ack = be32(tcp + 8);
  s.flags = tcp[13];
  s.payload = ip_payload > doff ? static_cast<std::uint32_t>(ip_payload - doff) : 0;
  return s;
}

// The shortest frame of a link type: its link-layer header, which every frame
// has (Ethernet 14 bytes; Linux cooked 16 and 20, which libpcap counts in the
// frame's length; raw IP the IPv4 header's 20, the IPv6 header's 40). Not an
// Ethernet frame's 60 bytes on the wire: the tap sees frames leaving the host
// before the NIC pads them. 1 for a link type no parser reads.
std::uint32_t shortest_frame(std::uint32_t linktype) {
  switch (linktype) {
    case 1: return 14;
    case 113: return 16;
    case 276: return 20;
    case 101:
    case 228: return 20;
    case 229: return 40;
    default: return 1;
  }
}

// Why a record (its 16-byte header at byte `at`) is no frame's (cold: only a
// damaged file gets here).
std::string not_a_frame(const std::string& path, std::uint64_t at, const std::uint8_t* header, std::uint32_t orig,
                        std::uint32_t linktype) {
  if (std::all_of(header, header + 16, [](std::uint8_t b) { return b == 0; })) {
    return "a frame of 0 bytes: the file looks zero-filled from here on (a damaged tail); `truncate -s " + std::to_string(at) +
           " " + path + "` keeps the frames before it";
  }
  if (orig == 0) return "a frame of 0 bytes, which no link carries";
  if (orig < shortest_frame(linktype)) {
    return "a frame of " + std::to_string(orig) + " bytes, shorter than a header of its link type " + std::to_string(linktype) + " (" +
           std::to_string(shortest_frame(linktype)) + " bytes)";
  }
  return "a frame of " + std::to_string(orig) + " bytes of which no byte was kept";
}

Direction cooked_direction(unsigned pkttype) {
  if (pkttype == 4) return Direction::outgoing;
  if (pkttype <= 3) return Direction::incoming;
  return Direction::unknown;
}

}  // namespace

bool known_linktype(std::uint32_t linktype) {
  return linktype == 1 || linktype == 101 || linktype == 113 || linktype == 228 || linktype == 229 || linktype == 276;
}

std::optional<Segment> parse_frame(std::uint32_t linktype, const std::uint8_t* d, std::size_t caplen, std::size_t wire_len) {
  std::optional<Segment> s;
  switch (linktype) {
    case 1: {  // Ethernet, with VLAN tags
      std::size_t off = 12;
      while (caplen >= off + 2 && (be16(d + off) == 0x8100 || be16(d + off) == 0x88a8)) off += 4;
      if (caplen < off + 2) return std::nullopt;
      const std::uint16_t type = be16(d + off);
      if (type != 0x0800 && type != 0x86dd) return std::nullopt;
      off += 2;
      s = parse_ip(d + off, caplen - off, wire_len > off ? wire_len - off : 0);
      break;
    }
    case 113: {  // Linux cooked v1
      if (caplen < 16) return std::nullopt;
      s = parse_ip(d + 16, caplen - 16, wire_len > 16 ? wire_len - 16 : 0);
      if (s) s->direction = cooked_direction(be16(d));
      break;
    }
    case 276: {  // Linux cooked v2
      if (caplen < 20) return std::nullopt;
      s = parse_ip(d + 20, caplen - 20, wire_len > 20 ? wire_len - 20 : 0);
      if (s) {
        s->direction = cooked_direction(d[10]);
        s->source = be32(d + 4) & 0xfffff;
      }
      break;
    }
    case 101:
    case 228:
    case 229:
      s = parse_ip(d, caplen, wire_len);
      break;
    default:
      return std::nullopt;
  }
  return s;
}

PcapInfo for_each_frame(const std::string& path, const std::function<void(const RawFrame&)>& f, const TimeSpan& span) {
  std::uint64_t file_size = 0;
  std::ifstream in = open_data_file(path, limits::kMaxDataFile, &file_size);
  std::uint8_t gh[24];
  in.read(reinterpret_cast<char*>(gh), sizeof gh);
  if (in.gcount() != 24) throw std::runtime_error(path + ": not a pcap file (shorter than its header)");
  std::uint32_t magic;
  std::memcpy(&magic, gh, 4);
  bool swap = false, nanos = false;
  switch (magic) {
    case 0xa1b2c3d4: break;
    case 0xa1b23c4d: nanos = true; break;
    case 0xd4c3b2a1: swap = true; break;
    case 0x4d3cb2a1: swap = true; nanos = true; break;
    default: throw std::runtime_error(path + ": not a pcap file (magic " + std::to_string(magic) + ")");
  }
  const auto u32 = [swap](const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
  };
  PcapInfo info;
  info.linktype = u32(gh + 20) & 0xffff;
  const std::uint32_t snaplen = u32(gh + 16);
  const std::uint32_t shortest = shortest_frame(info.linktype);
  std::vector<std::uint8_t> buf;
  std::uint64_t frames = 0;
  for (;;) {
    std::uint8_t rh[16];
    in.read(reinterpret_cast<char*>(rh), sizeof rh);
    if (in.gcount() == 0) break;
    if (in.gcount() != 16) {
      info.truncated = true;
      break;
    }
    const std::uint32_t incl = u32(rh + 8), orig = u32(rh + 12);
    // A frame is at least its link layer's header, and BPF keeps at least a byte
    // of a frame it accepts (keeping 0 is its "drop"). Zeros where records belong
    // (a file extended by `truncate`, blocks a crash left unwritten) read as
    // empty frames of 16 bytes each, 67 million per GB, at 15 s per GB.
    if (orig < shortest || incl == 0) [[unlikely]] {
      const std::uint64_t at = static_cast<std::uint64_t>(in.tellg()) - sizeof rh;
      throw std::runtime_error(path + ": record " + std::to_string(frames + 1) + ": " + not_a_frame(path, at, rh, orig, info.linktype));
    }
    // A damaged time (0xffffffff s: the year 2106) made a message queue for 79 years
    // in `trace show`.
    const Nanos ts = static_cast<Nanos>(u32(rh)) * kSecond + static_cast<Nanos>(u32(rh + 4)) * (nanos ? 1 : 1000);
    if (!span.holds(ts)) [[unlikely]] {
      throw std::runtime_error(path + ": record " + std::to_string(frames + 1) + ": a time of " + std::to_string(ts) + " ns, not " + span.what);
    }
    // At most the file's snapshot length (libpcap's largest is 256 KiB; a forged
    // header's is held to 16 MiB), and never more than the file has left: a record
    // claiming more is a cut one, read without allocating what it claims.
    if (incl > std::max<std::uint32_t>(std::min<std::uint32_t>(snaplen, 1u << 24), 262144)) {
      throw std::runtime_error(path + ": record " + std::to_string(frames + 1) + " claims " + std::to_string(incl) + " bytes");
    }
    const auto at = static_cast<std::uint64_t>(in.tellg());
    if (incl > file_size - std::min(at, file_size)) {
      info.truncated = true;
      break;
    }
    buf.resize(incl);
    in.read(reinterpret_cast<char*>(buf.data()), incl);
    if (static_cast<std::uint32_t>(in.gcount()) != incl) {
      info.truncated = true;
      break;
    }
    ++frames;
    f({ts, info.linktype, buf.data(), incl, orig});
  }
  return info;
}

PcapRead read_pcap(const std::string& path, std::uint32_t file, const TimeSpan& span) {
  PcapRead r;
  const PcapInfo info = for_each_frame(path, [&](const RawFrame& fr) {
    // Frames of a link type no parser reads would all be "other": say so instead.
    if (r.frames == 0 && !known_linktype(fr.linktype)) {
      throw std::runtime_error(path + ": link type " + std::to_string(fr.linktype) +
                               " is not one tensorwire reads (Ethernet 1, raw IP 101/228/229, Linux cooked 113/276)");
    }
    ++r.frames;
    auto s = parse_frame(fr.linktype, fr.data, fr.caplen, fr.origlen);
    if (!s) {
      ++r.other;
      return;
    }
    s->source |= file << 20;
    s->ts = fr.ts;
    r.segments.push_back(*s);
  }, span);
  r.linktype = info.linktype;
  r.truncated = info.truncated;
  return r;
}

void WireIndex::add(std::vector<Segment> segments) {
  count_ += segments.size();
  for (auto& s : segments) by_key_[s.key].push_back(s);
}

void WireIndex::finish() {
  for (auto& [key, v] : by_key_) {
    // A sender on this host: its frames leaving are the wire times; the same
    // frames arriving (loopback) are echoes.
    if (std::any_of(v.begin(), v.end(), [](const Segment& s) { return s.direction == Direction::outgoing; })) {
      std::erase_if(v, [](const Segment& s) { return s.direction == Direction::incoming; });
    }
    std::stable_sort(v.begin(), v.end(), [](const Segment& a, const Segment& b) { return a.ts < b.ts; });
    // The SYNs that open a session: each with another sequence number than the
    // session before (the same one again is a retransmitted SYN).
    std::vector<std::size_t>& starts = sessions_[key];
    starts.clear();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if ((v[i].flags & kSyn) && (starts.empty() || v[i].seq != v[starts.back()].seq)) starts.push_back(i);
    }
  }
}

namespace {

// The segments of one session of `v`: from the SYN opened last by `opened_by` up
// to the next SYN with another sequence number. nullopt without a SYN. By
// search among the key's sessions (`starts`, WireIndex::finish()): a trace may
// name one key in a hundred thousand connections.
struct Session {
  std::size_t first, last;  // [first, last) in v
  std::uint32_t isn;
  Nanos opened;
};

std::optional<Session> find_session(const std::vector<Segment>& v, const std::vector<std::size_t>& starts, Nanos opened_by) {
  const auto after =
      std::upper_bound(starts.begin(), starts.end(), opened_by, [&v](Nanos t, std::size_t i) { return t < v[i].ts; });
  if (after == starts.begin()) return std::nullopt;
  const std::size_t first = *std::prev(after);
  return Session{first, after == starts.end() ? v.size() : *after, v[first].seq, v[first].ts};
}

// Relative 32-bit sequence numbers, unwrapped to 64 bits around the last one.
struct Unwrap {
  std::uint32_t base;
  std::uint64_t last = 0;
  std::uint64_t operator()(std::uint32_t seq) {
    const std::uint32_t rel = seq - base;
    const auto delta = static_cast<std::int32_t>(rel - static_cast<std::uint32_t>(last));
    const auto v = static_cast<std::int64_t>(last) + delta;
    last = v < 0 ? 0 : static_cast<std::uint64_t>(v);
    return last;
  }
};

}  // namespace

std::optional<WireIndex::Start> WireIndex::stream_start(const FlowKey& key, Nanos opened_by) const {
  constexpr Nanos kSlack = kMilli;  // as stream()
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  const auto starts = sessions_.find(key);  // made by finish()
  if (starts == sessions_.end()) return std::nullopt;
  const auto session = find_session(it->second, starts->second, opened_by + kSlack);
  if (!session) return std::nullopt;
  const Nanos until = session->last < it->second.size() ? it->second[session->last].ts : std::numeric_limits<Nanos>::max();
  return Start{session->isn + 1, session->opened, until};
}

std::optional<WireIndex::Stream> WireIndex::stream(const FlowKey& key, Nanos opened_by) const {
  // A SYN leaves before connect()/accept() returns; allow for timestamps taken on
  // another CPU.
  constexpr Nanos kSlack = kMilli;
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  const auto& v = it->second;
  const auto starts = sessions_.find(key);  // made by finish()
  if (starts == sessions_.end()) return std::nullopt;
  const auto session = find_session(v, starts->second, opened_by + kSlack);
  if (!session) return std::nullopt;
  Stream st;
  Unwrap seq{session->isn + 1};
  // Bytes seen so far, as disjoint [begin, end) intervals: frames captured on
  // several CPUs are not in order, so first sightings can fill holes.
  std::map<std::uint64_t, std::uint64_t> covered;
  // The latest transmission of the bytes at an offset: when it was first seen and
  // at which capture points. The same point seeing them again is a new transmission.
  struct Sighting {
    std::uint32_t length;
    Nanos ts;
    std::vector<std::uint32_t> sources;
  };
  std::unordered_map<std::uint64_t, Sighting> last_at;
  for (std::size_t i = session->first; i < session->last; ++i) {
    const Segment& s = v[i];
    if (s.payload == 0) continue;
    const std::uint64_t b = seq(s.seq), e = b + s.payload;
    auto [at, fresh] = last_at.try_emplace(b, Sighting{s.payload, s.ts, {s.source}});
    Sighting& seen = at->second;
    const bool echo = !fresh && seen.length == s.payload && s.ts - seen.ts <= kEcho &&
                      std::find(seen.sources.begin(), seen.sources.end(), s.source) == seen.sources.end();
    if (echo) {
      seen.sources.push_back(s.source);
    } else if (!fresh) {
      seen = {s.payload, s.ts, {s.source}};
    }
    // The parts of [b, e) not seen before become first sightings.
    auto it = covered.upper_bound(b);
    if (it != covered.begin() && std::prev(it)->second > b) --it;
    std::uint64_t cur = b, lo = b, hi = e;
    bool overlap = false;
    while (it != covered.end() && it->first < e) {
      overlap = true;
      if (it->first > cur) st.firsts_.push_back({cur, it->first, s.ts});
      cur = std::max(cur, it->second);
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = covered.erase(it);
    }
    if (cur < e) st.firsts_.push_back({cur, e, s.ts});
    covered[lo] = hi;
    if (overlap && !echo) st.retrans_.push_back({b, e, s.ts});
  }
  st.bytes_ = 0;
  for (const auto& [b, e] : covered) st.bytes_ += e - b;
  std::sort(st.firsts_.begin(), st.firsts_.end(), [](const Stream::Span& a, const Stream::Span& b) { return a.begin < b.begin; });
  std::sort(st.retrans_.begin(), st.retrans_.end(), [](const Stream::Span& a, const Stream::Span& b) { return a.begin < b.begin; });
  if (const auto r = by_key_.find(key.reversed()); r != by_key_.end()) {
    Unwrap ack{session->isn + 1};
    for (const Segment& s : r->second) {
      if (s.ts < session->opened || !(s.flags & kAck)) continue;
      if (session->last < v.size() && s.ts >= v[session->last].ts) break;
      const std::uint64_t a = ack(s.ack);
      if (st.acks_.empty() || a > st.acks_.back().acked) st.acks_.push_back({a, s.ts});
    }
  }
  return st;
}

WireTimes WireIndex::Stream::times(std::uint64_t begin, std::uint64_t end) const {
  WireTimes w;
  if (end <= begin) return w;
  // The spans holding its bytes: the earliest is its first byte on the wire, the
  // latest its last (frames leave different CPUs out of order); a hole (bytes
  // the tap did not see) leaves wire_last unknown.
  auto f = std::upper_bound(firsts_.begin(), firsts_.end(), begin, [](std::uint64_t o, const Span& s) { return o < s.end; });
  std::uint64_t next = begin;
  Nanos lo = -1, hi = -1;
  for (; f != firsts_.end() && f->begin < end; ++f) {
    if (f->begin > next) next = ~std::uint64_t{0};  // hole
    else if (next != ~std::uint64_t{0}) next = f->end;
    lo = lo < 0 ? f->ts : std::min(lo, f->ts);
    hi = std::max(hi, f->ts);
  }
  w.wire_first = lo;
  if (next != ~std::uint64_t{0} && next >= end) w.wire_last = hi;
  auto a = std::lower_bound(acks_.begin(), acks_.end(), end, [](const Ack& x, std::uint64_t o) { return x.acked < o; });
  if (a != acks_.end()) w.acked = a->ts;
  // Retransmitted segments are at most 64 KiB (GSO: 256 KiB); look back that far.
  constexpr std::uint64_t kMaxSegment = 256 * 1024;
  auto r = std::lower_bound(retrans_.begin(), retrans_.end(), begin > kMaxSegment ? begin - kMaxSegment : 0,
                            [](const Span& s, std::uint64_t o) { return s.begin < o; });
  for (; r != retrans_.end() && r->begin < end; ++r) {
    if (r->end > begin) ++w.retransmits;
  }
  return w;
}

FlowKey flow_key(std::uint16_t family, const std::uint8_t* local, std::uint16_t local_port, const std::uint8_t* remote,
                 std::uint16_t remote_port) {
  FlowKey k;
  k.sport = local_port;
  k.dport = remote_port;
  if (family == AF_INET6 && !(v4_mapped(local) && v4_mapped(remote))) {
    k.v6 = true;
    std::memcpy(k.src.data(), local, 16);
    std::memcpy(k.dst.data(), remote, 16);
  } else if (family == AF_INET6) {
    std::memcpy(k.src.data(), local + 12, 4);
    std::memcpy(k.dst.data(), remote + 12, 4);
  } else {
    std::memcpy(k.src.data(), local, 4);
    std::memcpy(k.dst.data(), remote, 4);
  }
  return k;
}

}  // namespace tw::wire

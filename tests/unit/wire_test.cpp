// The wire tap's reader: frames parsed from bytes, pcap files, and segments
// mapped onto stream offsets (out of order, retransmitted, echoed, wrapped).
#include "tensorwire/core/wire.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tensorwire/core/trace.hpp"
#include "../support/page_faults.hpp"

namespace tw::wire {
namespace {

void put16(std::vector<std::uint8_t>& v, std::size_t at, std::uint16_t x) {
  v[at] = static_cast<std::uint8_t>(x >> 8);
  v[at + 1] = static_cast<std::uint8_t>(x);
}
void put32(std::vector<std::uint8_t>& v, std::size_t at, std::uint32_t x) {
  put16(v, at, static_cast<std::uint16_t>(x >> 16));
  put16(v, at + 2, static_cast<std::uint16_t>(x));
}

// An Ethernet + IPv4 + TCP frame header (payload not included, as the tap
// captures it), the IP length saying `payload` bytes follow.
std::vector<std::uint8_t> eth_v4(std::uint16_t sport, std::uint16_t dport, std::uint32_t seq, std::uint32_t ack,
                                 std::uint8_t flags, std::uint32_t payload) {
  std::vector<std::uint8_t> f(14 + 20 + 32, 0);
  put16(f, 12, 0x0800);
  f[14] = 0x45;
  put16(f, 16, static_cast<std::uint16_t>(20 + 32 + payload));
  f[14 + 9] = 6;
  const std::uint8_t src[4] = {10, 0, 0, 1}, dst[4] = {10, 0, 0, 2};
  std::memcpy(&f[14 + 12], src, 4);
  std::memcpy(&f[14 + 16], dst, 4);
  const std::size_t t = 34;
  put16(f, t, sport);
  put16(f, t + 2, dport);
  put32(f, t + 4, seq);
  put32(f, t + 8, ack);
  f[t + 12] = 8 << 4;  // 32-byte header (timestamps option)
  f[t + 13] = flags;
  return f;
}

TEST(WireFrames, ParsesEthernetIpv4Tcp) {
  const auto f = eth_v4(5000, 6000, 1234, 99, kAck, 1448);
  const auto s = parse_frame(1, f.data(), f.size(), f.size() + 1448);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->key.sport, 5000);
  EXPECT_EQ(s->key.dport, 6000);
  EXPECT_EQ(s->key.src[0], 10);
  EXPECT_EQ(s->key.dst[3], 2);
  EXPECT_FALSE(s->key.v6);
  EXPECT_EQ(s->seq, 1234U);
  EXPECT_EQ(s->ack, 99U);
  EXPECT_EQ(s->payload, 1448U);
  EXPECT_EQ(s->flags, kAck);
  EXPECT_EQ(s->direction, Direction::unknown);
}

TEST(WireFrames, TakesTheFrameLengthWhenTheIpLengthIsZero) {
  auto f = eth_v4(1, 2, 0, 0, kAck, 0);
  put16(f, 16, 0);  // a GSO packet above 64 KiB
  const auto s = parse_frame(1, f.data(), f.size(), 14 + 20 + 32 + 100000);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->payload, 100000U);
}

TEST(WireFrames, ParsesCookedV2Ipv6WithDirectionAndInterface) {
  std::vector<std::uint8_t> f(20 + 40 + 20, 0);
  put16(f, 0, 0x86dd);
  put32(f, 4, 7);  // ifindex
  f[10] = 4;       // outgoing
  f[20] = 0x60;
  put16(f, 24, 20 + 10);
  f[26] = 6;
  f[20 + 8 + 15] = 1;   // ::1
  f[20 + 24 + 15] = 1;
  put16(f, 60, 40000);
  put16(f, 62, 29500);
  put32(f, 64, 77);
  f[72] = 5 << 4;
  f[73] = kAck;
  const auto s = parse_frame(276, f.data(), f.size(), f.size() + 10);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->key.v6);
  EXPECT_EQ(s->key.src[15], 1);
  EXPECT_EQ(s->payload, 10U);
  EXPECT_EQ(s->direction, Direction::outgoing);
  EXPECT_EQ(s->source, 7U);
}

TEST(WireFrames, RejectsWhatIsNotTcp) {
  auto udp = eth_v4(1, 2, 0, 0, 0, 0);
  udp[14 + 9] = 17;
  EXPECT_FALSE(parse_frame(1, udp.data(), udp.size(), udp.size()));
  auto arp = eth_v4(1, 2, 0, 0, 0, 0);
  put16(arp, 12, 0x0806);
  EXPECT_FALSE(parse_frame(1, arp.data(), arp.size(), arp.size()));
  const auto ok = eth_v4(1, 2, 0, 0, 0, 0);
  EXPECT_FALSE(parse_frame(1, ok.data(), 40, ok.size())) << "cut inside the TCP header";
  EXPECT_FALSE(parse_frame(147, ok.data(), ok.size(), ok.size())) << "unknown link type";
  auto frag = eth_v4(1, 2, 0, 0, 0, 0);
  put16(frag, 20, 100);  // fragment offset
  EXPECT_FALSE(parse_frame(1, frag.data(), frag.size(), frag.size()));
}

class PcapFile : public ::testing::Test {
 protected:
  std::string path = (std::filesystem::temp_directory_path() / ("tw-wire-test-" + std::to_string(::getpid()) + ".pcap")).string();
  std::uint32_t first_second = 100;  // record i's time: first_second + i s, 250 + i ns (or us)
  std::uint32_t uncaptured = 1000;   // each frame's bytes on the wire beyond those written
  void TearDown() override { std::filesystem::remove(path); }
  void write(std::uint32_t magic, bool swapped, const std::vector<std::vector<std::uint8_t>>& frames, std::size_t cut = 0,
             std::uint32_t linktype = 1) {
    std::vector<std::uint8_t> out;
    const auto u32 = [&](std::uint32_t v) {
      if (swapped) v = __builtin_bswap32(v);
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    };
    const auto u16 = [&](std::uint16_t v) {
      if (swapped) v = static_cast<std::uint16_t>(v >> 8 | v << 8);
      out.push_back(static_cast<std::uint8_t>(v));
      out.push_back(static_cast<std::uint8_t>(v >> 8));
    };
    u32(magic);
    u16(2);
    u16(4);
    u32(0);
    u32(0);
    u32(160);
    u32(linktype);
    std::uint32_t i = 0;
    for (const auto& f : frames) {
      u32(first_second + i);
      u32(250 + i++);
      u32(static_cast<std::uint32_t>(f.size()));
      u32(static_cast<std::uint32_t>(f.size() + uncaptured));
      out.insert(out.end(), f.begin(), f.end());
    }
    out.resize(out.size() - cut);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  }
};

TEST_F(PcapFile, ReadsNanosecondAndMicrosecondFilesInEitherByteOrder) {
  const std::vector<std::vector<std::uint8_t>> frames = {eth_v4(1, 2, 10, 0, kAck, 1000), eth_v4(2, 1, 0, 11, kAck, 0)};
  for (const bool swapped : {false, true}) {
    write(0xa1b23c4d, swapped, frames);
    PcapRead r = read_pcap(path, 3);
    ASSERT_EQ(r.segments.size(), 2U);
    EXPECT_EQ(r.linktype, 1U);
    EXPECT_EQ(r.segments[0].ts, 100 * kSecond + 250);
    EXPECT_EQ(r.segments[1].ts, 101 * kSecond + 251);
    EXPECT_EQ(r.segments[0].source >> 20, 3U);
    EXPECT_EQ(r.segments[0].payload, 1000U);
    write(0xa1b2c3d4, swapped, frames);
    r = read_pcap(path);
    EXPECT_EQ(r.segments[0].ts, 100 * kSecond + 250 * kMicro);
  }
}

TEST_F(PcapFile, CountsACutLastRecordAndRejectsOtherFiles) {
  write(0xa1b23c4d, false, {eth_v4(1, 2, 10, 0, kAck, 1000), eth_v4(1, 2, 1010, 0, kAck, 1000)}, 7);
  const PcapRead r = read_pcap(path);
  EXPECT_EQ(r.segments.size(), 1U);
  EXPECT_TRUE(r.truncated);
  std::ofstream(path) << "not a capture at all, just text";
  try {
    read_pcap(path);
    FAIL() << "accepted a text file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": not a pcap file", 0), 0U) << e.what();
  }
  EXPECT_THROW(read_pcap(path + ".missing"), std::runtime_error);
}

// Frames of a link type no parser reads are an error naming the file and the
// type, not a capture whose every frame is silently "other".
TEST_F(PcapFile, AnUnknownLinkTypeIsRefused) {
  write(0xa1b23c4d, false, {eth_v4(1, 2, 10, 0, kAck, 1000)}, 0, 147);
  try {
    read_pcap(path);
    FAIL() << "accepted link type 147";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": link type 147 is not one tensorwire reads", 0), 0U) << e.what();
  }
  write(0xa1b23c4d, false, {}, 0, 147);  // no frames: nothing to misread
  EXPECT_EQ(read_pcap(path).frames, 0U);
  EXPECT_THROW(read_pcap("/dev/zero"), std::runtime_error);
}

// Found by capture_fuzz: a header with a huge snapshot length and a record that
// claims 1.8 GB made the reader allocate all of it. A record claiming more than
// the file has left is a cut one now; one beyond any snapshot length is refused.
TEST_F(PcapFile, ARecordClaimingMoreThanTheFileIsACutOne) {
  std::string b(24 + 16 + 8, '\0');
  const auto u32 = [&b](std::size_t at, std::uint32_t v) { std::memcpy(b.data() + at, &v, 4); };
  u32(0, 0xa1b2c3d4);
  u32(16, 0xffffffff);  // snaplen
  u32(20, 1);
  u32(24 + 8, 1'869'835'877);  // included length
  u32(24 + 12, 1'869'835'877);
  std::ofstream(path, std::ios::binary) << b;
  EXPECT_THROW(read_pcap(path), std::runtime_error);  // beyond any snapshot length (16 MiB at most)
  u32(24 + 8, 1'000'000);  // within it, but the file has 8 bytes left
  std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
  const PcapRead r = read_pcap(path);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.frames, 0U);
}

// Found by a probe of damaged captures: a wire file extended with zeros
// (`truncate -s 3G`) read as 67 million empty frames a GB, at 15 s a GB, so
// `trace show` seemed to hang. No frame is shorter than its link layer's header,
// and BPF keeps at least a byte of a frame it captures.
TEST_F(PcapFile, AFrameShorterThanItsLinkHeaderIsRefused) {
  const auto refused = [](auto read) -> std::string {
    try {
      read();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "read";
  };
  write(0xa1b23c4d, false, {eth_v4(1, 2, 10, 0, kAck, 1000), eth_v4(1, 2, 1010, 0, kAck, 1000)});
  const auto frames_end = std::filesystem::file_size(path);
  std::ofstream(path, std::ios::binary | std::ios::app) << std::string(4096, '\0');
  EXPECT_EQ(refused([&] { read_pcap(path); }),
            path + ": record 3: a frame of 0 bytes: the file looks zero-filled from here on (a damaged tail); `truncate -s " +
                std::to_string(frames_end) + " " + path + "` keeps the frames before it");
  // Each link type's header: Ethernet, Linux cooked v1 and v2, raw IP (either,
  // IPv4, IPv6).
  uncaptured = 0;
  for (const auto& [linktype, header] : std::vector<std::pair<std::uint32_t, std::size_t>>{
           {1, 14}, {113, 16}, {276, 20}, {101, 20}, {228, 20}, {229, 40}}) {
    SCOPED_TRACE(linktype);
    write(0xa1b23c4d, false, {std::vector<std::uint8_t>(header, 0)}, 0, linktype);
    EXPECT_EQ(refused([&] { for_each_frame(path, [](const RawFrame&) {}); }), "read");
    write(0xa1b23c4d, false, {std::vector<std::uint8_t>(header - 1, 0)}, 0, linktype);
    EXPECT_EQ(refused([&] { for_each_frame(path, [](const RawFrame&) {}); }),
              path + ": record 1: a frame of " + std::to_string(header - 1) + " bytes, shorter than a header of its link type " +
                  std::to_string(linktype) + " (" + std::to_string(header) + " bytes)");
  }
  // Of a link type no parser reads, a byte at least.
  write(0xa1b23c4d, false, {{}}, 0, 147);
  EXPECT_EQ(refused([&] { for_each_frame(path, [](const RawFrame&) {}); }), path + ": record 1: a frame of 0 bytes, which no link carries");
  write(0xa1b23c4d, false, {{0}}, 0, 147);
  EXPECT_EQ(refused([&] { for_each_frame(path, [](const RawFrame&) {}); }), "read");
  uncaptured = 60;
  write(0xa1b23c4d, false, {{}});
  EXPECT_EQ(refused([&] { read_pcap(path); }), path + ": record 1: a frame of 60 bytes of which no byte was kept");
}

// Found by the same probe: a record stamped 0xffffffff s (the year 2106) made a
// message queue for 79 years in `trace show`. Frames are held to the capture's
// time as its events are (capture_span: TraceReport tests).
TEST_F(PcapFile, AFrameOutsideTheCapturesTimeIsRefused) {
  const TimeSpan span{100 * kSecond, 200 * kSecond, "in the test's span"};
  first_second = 199;  // the second frame at 200 s + 251 ns: past it
  write(0xa1b23c4d, false, {eth_v4(1, 2, 10, 0, kAck, 1000), eth_v4(1, 2, 1010, 0, kAck, 1000)});
  try {
    read_pcap(path, 0, span);
    FAIL() << "accepted a frame after the span";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": record 2: a time of 200000000251 ns, not in the test's span");
  }
  EXPECT_THROW(for_each_frame(path, [](const RawFrame&) {}, span), std::runtime_error);
  EXPECT_EQ(read_pcap(path).segments.size(), 2U) << "no span: any time";
  first_second = 99;  // the first frame at 99 s + 250 ns: before it
  write(0xa1b23c4d, false, {eth_v4(1, 2, 10, 0, kAck, 1000)});
  EXPECT_THROW(read_pcap(path, 0, span), std::runtime_error);
  first_second = 100;
  write(0xa1b23c4d, false, {eth_v4(1, 2, 10, 0, kAck, 1000), eth_v4(1, 2, 1010, 0, kAck, 1000)});
  EXPECT_EQ(read_pcap(path, 0, span).segments.size(), 2U);
}

// A connection 10.0.0.1:5000 -> 10.0.0.2:6000 built segment by segment.
struct Flow {
  FlowKey key = [] {
    FlowKey k;
    k.src[0] = 10, k.src[3] = 1, k.dst[0] = 10, k.dst[3] = 2, k.sport = 5000, k.dport = 6000;
    return k;
  }();
  std::uint32_t isn = 1000;
  std::vector<Segment> out;
  Segment seg(Nanos ts, std::uint64_t offset, std::uint32_t len, std::uint8_t flags = kAck, std::uint32_t source = 0) {
    Segment s;
    s.ts = ts;
    s.key = key;
    s.seq = isn + 1 + static_cast<std::uint32_t>(offset);
    s.payload = len;
    s.flags = flags;
    s.source = source;
    return s;
  }
  void syn(Nanos ts) {
    Segment s = seg(ts, 0, 0, kSyn);
    s.seq = isn;
    out.push_back(s);
  }
  void data(Nanos ts, std::uint64_t offset, std::uint32_t len, std::uint32_t source = 0) { out.push_back(seg(ts, offset, len, kAck, source)); }
  void ack(Nanos ts, std::uint64_t acked) {
    Segment s;
    s.ts = ts;
    s.key = key.reversed();
    s.ack = isn + 1 + static_cast<std::uint32_t>(acked);
    s.flags = kAck;
    out.push_back(s);
  }
};

WireIndex index_of(std::vector<Segment> segs) {
  WireIndex w;
  w.add(std::move(segs));
  w.finish();
  return w;
}

TEST(WireIndex, MapsSegmentsOntoStreamOffsets) {
  Flow f;
  f.syn(100);
  f.data(1000, 0, 500);
  f.data(1100, 500, 500);
  f.ack(1500, 1000);
  f.data(2000, 1000, 100);
  f.ack(2600, 1100);
  const WireIndex w = index_of(f.out);
  const auto st = w.stream(f.key, 200);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->bytes_seen(), 1100U);
  EXPECT_EQ(st->retransmits(), 0U);
  WireTimes t = st->times(0, 1000);
  EXPECT_EQ(t.wire_first, 1000);
  EXPECT_EQ(t.wire_last, 1100);
  EXPECT_EQ(t.acked, 1500);
  t = st->times(1000, 1100);
  EXPECT_EQ(t.wire_first, 2000);
  EXPECT_EQ(t.wire_last, 2000);
  EXPECT_EQ(t.acked, 2600);
  t = st->times(600, 700);  // inside one segment
  EXPECT_EQ(t.wire_first, 1100);
  EXPECT_EQ(t.wire_last, 1100);
  EXPECT_EQ(t.acked, 1500);
  EXPECT_EQ(st->times(1100, 1200).wire_last, -1) << "bytes never seen";
  EXPECT_FALSE(w.stream(f.key.reversed(), 200)) << "no SYN that way";
  EXPECT_FALSE(w.stream(f.key, 100 - 2 * kMilli)) << "opened before the SYN";
}

TEST(WireIndex, OutOfOrderFirstSightingsAreNotRetransmissions) {
  Flow f;
  f.syn(0);
  f.data(1000, 1000, 1000);  // captured on another CPU first
  f.data(1010, 0, 1000);
  const auto st = index_of(f.out).stream(f.key, 0);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->retransmits(), 0U);
  const WireTimes t = st->times(0, 2000);
  EXPECT_EQ(t.wire_first, 1000);
  EXPECT_EQ(t.wire_last, 1010);
}

TEST(WireIndex, CountsRetransmissionsButNotTheSamePacketSeenTwice) {
  Flow f;
  f.syn(0);
  f.data(1000, 0, 1000, 1);
  f.data(1020, 0, 1000, 2);  // the same frame at a second capture point
  f.data(1030, 1000, 1000, 1);
  f.data(1050, 0, 1000, 1);  // fast retransmit: the same capture point
  f.data(900000, 500, 1000, 1);  // after a timeout, partly new
  const auto st = index_of(f.out).stream(f.key, 0);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->retransmits(), 2U);
  EXPECT_EQ(st->bytes_seen(), 2000U);
  EXPECT_EQ(st->times(0, 1000).retransmits, 2U);
  EXPECT_EQ(st->times(0, 1000).wire_last, 1000) << "first sighting, not the retransmission";
  EXPECT_EQ(st->times(1000, 2000).retransmits, 1U);
  EXPECT_EQ(st->times(2000, 3000).retransmits, 0U);
}

TEST(WireIndex, UnwrapsSequenceNumbersPastTwoToTheThirtyTwo) {
  // Sequence numbers start just below the wrap; 5 GB go by in steps under 2^31.
  Flow g;
  g.isn = 0xffffff00U;
  g.syn(0);
  std::uint64_t off = 0;
  for (Nanos t = 1; off < 5'000'000'000ULL; ++t, off += 1'000'000'000ULL / 2) {
    g.data(t, off, 1000);
    g.ack(1'000'000 + t, off + 1000);
  }
  const auto st = index_of(g.out).stream(g.key, 0);
  ASSERT_TRUE(st);
  const WireTimes t = st->times(4'500'000'000ULL, 4'500'000'000ULL + 1000);
  EXPECT_EQ(t.wire_first, 10);
  EXPECT_EQ(t.acked, 1'000'010);
}

// A SYN sent again (the same sequence number) opens no new session: a session
// runs from its first SYN, across any resent, to the next SYN with another number.
TEST(WireIndex, PicksTheSessionOpenedLastBeforeTheConnection) {
  Flow f;
  f.syn(100);
  f.syn(1100);  // sent again
  f.data(2000, 0, 10);
  f.isn = 50000;  // the same ports, a new connection later
  f.syn(5 * kSecond);
  f.data(5 * kSecond + 100, 0, 20);
  const WireIndex w = index_of(f.out);
  const auto first = w.stream(f.key, 3000);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->bytes_seen(), 10U);
  EXPECT_EQ(first->times(0, 10).wire_first, 2000);
  const auto start = w.stream_start(f.key, 3000);
  ASSERT_TRUE(start);
  EXPECT_EQ(start->opened, 100) << "the first SYN, not the one sent again";
  EXPECT_EQ(start->until, 5 * kSecond) << "the next session's SYN";
  EXPECT_EQ(start->seq0, 1001U);
  const auto second = w.stream(f.key, 5 * kSecond + 50);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->bytes_seen(), 20U);
  EXPECT_EQ(second->times(0, 20).wire_first, 5 * kSecond + 100);
  EXPECT_EQ(w.stream_start(f.key, 5 * kSecond + 50)->until, std::numeric_limits<Nanos>::max());
}

// Connections that name one session share its stream: a trace that lists the
// same connection ten thousand times (damaged, or forged) once made the analysis
// build and keep a copy of the stream for each: 200 000 pages here, and 6.3 s and
// 1.5 GB in trace show for 300 000 such connections over a real capture.
TEST(WireIndex, ConnectionsOfOneSessionShareItsStream) {
  Flow f;
  f.syn(100);
  constexpr int kSegments = 2000;
  for (int i = 0; i < kSegments; ++i) {
    f.data(1000 + 10 * i, 100 * static_cast<std::uint64_t>(i), 100);
    f.ack(1005 + 10 * i, 100 * static_cast<std::uint64_t>(i + 1));
  }
  const WireIndex w = index_of(f.out);
  ProcessTrace t;
  t.pid = 42;
  constexpr std::uint32_t kConnections = 10000;
  for (std::uint32_t i = 1; i <= kConnections; ++i) {
    trace::ConnEvent c{};
    c.kind = trace::Kind::conn;
    c.family = AF_INET;
    c.conn = i;
    c.at_ns = 200;
    c.how = trace::ConnOrigin::connect;
    std::memcpy(c.local, f.key.src.data(), 4);
    std::memcpy(c.remote, f.key.dst.data(), 4);
    c.local_port = f.key.sport;
    c.remote_port = f.key.dport;
    t.conns.push_back(c);
  }
  trace::Event e{};  // the last connection sends the first 1000 bytes
  e.kind = trace::Kind::send;
  e.call = trace::Call::send;
  e.conn = kConnections;
  e.enter_ns = 900;
  e.exit_ns = 950;
  e.result = 1000;
  e.requested = 1000;
  t.io.push_back(e);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  const long before = test::minor_faults();
#endif
  const CaptureAnalysis a = analyse_capture({t}, 100 * kMicro, &w);
  ASSERT_EQ(a.connections.size(), kConnections);
  for (const Connection& c : a.connections) {
    ASSERT_TRUE(c.on_wire);
    ASSERT_EQ(c.wire_bytes, 100U * kSegments);
  }
  ASSERT_EQ(a.messages.size(), 1U);
  EXPECT_EQ(a.messages[0].wire_first, 1000);
  EXPECT_EQ(a.messages[0].wire_last, 1090);
  EXPECT_EQ(a.messages[0].acked, 1095);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Pages of 4 KiB; a stream each took 200 000.
  EXPECT_LT(test::minor_faults() - before, 32000) << "pages touched";
#endif
}

TEST(WireIndex, PrefersFramesLeavingOverTheSameFramesArriving) {
  Flow f;
  f.syn(0);
  f.data(1000, 0, 100);
  f.out.back().direction = Direction::outgoing;
  f.data(1500, 0, 100);  // arriving at the other end of a loopback or veth
  f.out.back().direction = Direction::incoming;
  f.out.back().source = 9;
  const auto st = index_of(f.out).stream(f.key, 0);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->retransmits(), 0U);
  EXPECT_EQ(st->times(0, 100).wire_first, 1000);
}

TEST(WireIndex, FoldsIpv4MappedAddressesOfDualStackSockets) {
  std::uint8_t a[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  std::uint8_t b[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2};
  const FlowKey k = flow_key(AF_INET6, a, 1, b, 2);
  EXPECT_FALSE(k.v6);
  EXPECT_EQ(k.src[0], 127);
  EXPECT_EQ(k.dst[3], 2);
  const std::uint8_t v4a[4] = {127, 0, 0, 1}, v4b[4] = {127, 0, 0, 2};
  EXPECT_EQ(k, flow_key(AF_INET, v4a, 1, v4b, 2));
}

}  // namespace
}  // namespace tw::wire

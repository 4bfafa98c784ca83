// Message boundaries from transport framing. Each stream is built the way its
// real sender writes it (per the sender's source: Gloo's pair.cc writev of
// preamble and buffer, libzmq's 8 KiB batches and zero-copy bodies, OpenMPI's
// one writev per BTL fragment), split into the sender's send calls, and sampled
// the way the shim samples (first 32 and last 16 bytes of each call). The
// fixtures in tests/unit/framing/ are real streams (its README says how they
// were made): a torch 1.13 Gloo pair and its TCPStore, a pyzmq (libzmq 4.3.4)
// DEALER, mpi4py over Open MPI 4.1.4's TCP BTL.
#include "tensorwire/core/framing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensorwire/core/frame.hpp"

namespace tw::framing {
namespace {

using Bytes = std::vector<std::uint8_t>;

void put_le(Bytes& b, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_be(Bytes& b, std::uint64_t v, std::size_t n) {
  for (std::size_t i = n; i-- > 0;) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }
Bytes filled(std::size_t n, std::uint8_t v) { return Bytes(n, v); }
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What the shim records of a call that moved n bytes at `offset`: its first 32,
// then its last 16 not overlapping them.
trace::SampleEvent sample_of(std::uint32_t conn, std::uint64_t offset, const std::uint8_t* p, std::uint64_t n) {
  trace::SampleEvent e{};
  e.kind = trace::Kind::sample;
  e.conn = conn;
  e.offset = offset;
  e.head_len = static_cast<std::uint8_t>(std::min<std::uint64_t>(trace::kSampleHead, n));
  e.tail_len = static_cast<std::uint8_t>(std::min<std::uint64_t>(trace::kSampleTail, n - e.head_len));
  std::memcpy(e.head, p, e.head_len);
  std::memcpy(e.tail, p + n - e.tail_len, e.tail_len);
  return e;
}

// One direction of a connection, as the sender's send calls moved it.
struct Sent {
  Bytes bytes;
  std::vector<std::uint64_t> calls;  // bytes moved by each call, in order

  void call(const Bytes& b) { call(b.data(), b.size()); }
  void call(const std::uint8_t* p, std::size_t n) {
    bytes.insert(bytes.end(), p, p + n);
    calls.push_back(n);
  }
  // A write the kernel takes at most `limit` bytes of at a time: the sender calls again for the rest.
  void write(const Bytes& b, std::size_t limit) {
    for (std::size_t at = 0; at < b.size(); at += limit) call(b.data() + at, std::min(limit, b.size() - at));
  }
  std::uint64_t end() const { return bytes.size(); }

  SparseBytes samples() const {
    SparseBytes s;
    std::uint64_t off = 0;
    for (const std::uint64_t n : calls) {
      EXPECT_TRUE(s.add_sample(sample_of(1, off, bytes.data() + off, n), n));
      off += n;
    }
    return s;
  }
};

struct Want {
  std::uint64_t begin, end;
  MessageKind kind;
  std::string what;
};

std::string show(const std::vector<DecodedMessage>& ms) {
  std::ostringstream o;
  for (const auto& m : ms) o << "[" << m.begin << "," << m.end << ") " << kind_name(m.kind) << " " << m.what << " x" << m.parts << "\n";
  return o.str();
}

void expect_messages(const DecodedStream& d, const std::vector<Want>& want) {
  ASSERT_EQ(d.messages.size(), want.size()) << show(d.messages) << d.note;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(d.messages[i].begin, want[i].begin) << i << "\n" << show(d.messages);
    EXPECT_EQ(d.messages[i].end, want[i].end) << i << "\n" << show(d.messages);
    EXPECT_EQ(d.messages[i].kind, want[i].kind) << i;
    EXPECT_EQ(d.messages[i].what, want[i].what) << i;
  }
}

// What every answer must satisfy, whatever the bytes.
void check_invariants(const DecodedStream& d, std::uint64_t end) {
  ASSERT_LE(d.decoded_until, end);
  std::uint64_t covered = 0, last_end = 0, last_begin = 0;
  for (const auto& m : d.messages) {
    ASSERT_LT(m.begin, m.end);
    ASSERT_GE(m.begin, last_begin);
    ASSERT_LE(m.end, d.decoded_until);
    ASSERT_LE(m.bytes, m.end - m.begin);
    if (d.transport != Transport::openmpi) {
      ASSERT_EQ(m.begin, last_end) << "messages must tile the decoded range";
      ASSERT_EQ(m.bytes, m.end - m.begin);
    }
    covered += m.bytes;
    last_begin = m.begin;
    last_end = std::max(last_end, m.end);
  }
  ASSERT_EQ(covered, d.messages.empty() ? 0 : d.decoded_until);
  if (d.transport == Transport::unknown) {
    ASSERT_TRUE(d.messages.empty());
  }
}

DecodedStream decode(const Sent& s, const Sent* peer = nullptr) {
  const SparseBytes a = s.samples();
  const SparseBytes b = peer ? peer->samples() : SparseBytes{};
  DecodedStream d = decode_stream(a, s.end(), peer ? &b : nullptr);
  check_invariants(d, s.end());
  return d;
}

// --- SparseBytes ------------------------------------------------------------

TEST(SparseBytes, ReadsAcrossAbuttingPiecesAndNothingAcrossAGap) {
  SparseBytes s;
  const Bytes a = text("abcd"), b = text("efgh"), c = text("XY");
  s.add(10, a.data(), a.size());
  s.add(14, b.data(), b.size());
  s.add(20, c.data(), c.size());
  EXPECT_EQ(s.read(12, 4), text("cdef"));
  EXPECT_EQ(s.read(10, 8), text("abcdefgh"));
  EXPECT_FALSE(s.read(16, 4));  // 18, 19 unknown
  EXPECT_FALSE(s.read(9, 2));
  EXPECT_EQ(s.read(21, 1), text("Y"));
  EXPECT_FALSE(s.read(0, 1U << 30));  // no allocation for what cannot be there
}

TEST(SparseBytes, KeepsTheFirstBytesRecordedWhereAddsOverlap) {
  SparseBytes s;
  const Bytes a = text("AAAA"), b = text("bbbbbbbb");
  s.add(4, a.data(), a.size());
  s.add(2, b.data(), b.size());
  EXPECT_EQ(s.read(2, 8), text("bbAAAAbb"));
  EXPECT_EQ(s.bytes(), 8U);
}

TEST(SparseBytes, SurvivesOffsetsAtTheEndOfTheRange) {
  SparseBytes s;
  const Bytes a = text("abcdefgh");
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  s.add(top - 3, a.data(), a.size());
  EXPECT_EQ(s.bytes(), 3U);
  EXPECT_EQ(s.read(top - 3, 3), text("abc"));
  EXPECT_FALSE(s.read(top - 1, 8));
}

TEST(SparseBytes, AgreesWithAByteByByteModelWhateverTheOrderOfAdds) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    SparseBytes s;
    std::map<std::uint64_t, std::uint8_t> model;
    for (int k = 0; k < 40; ++k) {
      const std::uint64_t offset = rng() % 400;  // overlapping, abutting and out of order
      Bytes b(rng() % 40);
      for (auto& x : b) x = static_cast<std::uint8_t>(rng());
      s.add(offset, b.data(), b.size());
      for (std::size_t i = 0; i < b.size(); ++i) model.emplace(offset + i, b[i]);
    }
    ASSERT_EQ(s.bytes(), model.size());
    for (std::uint64_t o = 0; o < 450; ++o) {
      const std::size_t n = 1 + rng() % 48;
      bool all = true;
      for (std::size_t i = 0; i < n; ++i) all = all && model.count(o + i);
      const auto got = s.read(o, n);
      ASSERT_EQ(got.has_value(), all) << o << " " << n;
      for (std::size_t i = 0; all && i < n; ++i) ASSERT_EQ((*got)[i], model[o + i]);
    }
  }
}

TEST(SparseBytes, PlacesTheTailAtTheCallsEndAndRejectsImpossibleSamples) {
  trace::SampleEvent e{};
  e.kind = trace::Kind::sample;
  e.offset = 100;
  e.head_len = 32;
  e.tail_len = 16;
  std::memset(e.head, 'h', 32);
  std::memset(e.tail, 't', 16);
  SparseBytes s;
  EXPECT_TRUE(s.add_sample(e, 1000));
  EXPECT_EQ(s.read(131, 1), text("h"));
  EXPECT_EQ(s.read(1084, 16), filled(16, 't'));
  EXPECT_FALSE(s.read(132, 1));
  e.tail_len = 17;
  EXPECT_FALSE(s.add_sample(e, 1000));
  e.tail_len = 16;
  EXPECT_FALSE(s.add_sample(e, 40));  // 32 + 16 > 40: they would overlap
  e.offset = std::numeric_limits<std::uint64_t>::max() - 10;
  EXPECT_FALSE(s.add_sample(e, 1000));
}

// --- Gloo -------------------------------------------------------------------



// gloo/transport/tcp/pair.h Op::preamble, pair.cc sendNotify*/sendUnboundBuffer.
Bytes gloo_op(std::uint64_t opcode, std::uint64_t slot, std::uint64_t length, std::uint8_t fill = 0x3f) {
  const bool data = opcode <= 1;
  Bytes b;
  put_le(b, data ? 48 + length : 48, 8);
  put_le(b, opcode, 8);
  put_le(b, slot, 8);
  put_le(b, 0, 8);       // offset
  put_le(b, length, 8);  // notifications: the size of the transfer they announce
  put_le(b, 0, 8);       // roffset
  if (data) b.resize(b.size() + length, fill);
  return b;
}

TEST(SentStream, PlacesEachSampleByItsSendEventAndCountsTheRest) {
  // A notification and a data op, as a Gloo pair's trace holds them, plus noise:
  // a receive, a failed send, another connection, a sample with no send.
  const Bytes a = gloo_op(2, 0, 4000), b = gloo_op(1, 0, 4000), other = filled(100, 0xee);
  auto event = [](trace::Kind kind, std::uint8_t flags, std::uint32_t conn, std::uint64_t offset, std::int64_t result) {
    trace::Event e{};
    e.kind = kind;
    e.flags = flags;
    e.conn = conn;
    e.offset = offset;
    e.result = result;
    e.requested = result > 0 ? static_cast<std::uint64_t>(result) : 0;
    return e;
  };
  const std::vector<trace::Event> io = {
      event(trace::Kind::send, 0, 7, 48, static_cast<std::int64_t>(b.size())),  // file order need not be stream order
      event(trace::Kind::send, 0, 7, 0, 48),
      event(trace::Kind::send, 0, 8, 0, 100),
      event(trace::Kind::recv, 0, 7, 0, 100000),
      event(trace::Kind::send, trace::kFlagError, 7, 48 + b.size(), -1)};
  std::vector<trace::SampleEvent> samples = {sample_of(7, 48, b.data(), b.size()), sample_of(7, 0, a.data(), a.size()),
                                             sample_of(8, 0, other.data(), other.size()), sample_of(7, 5, a.data(), 1)};

  const SentStream s = sent_stream(io, samples, 7);
  EXPECT_EQ(s.end, 48 + b.size());
  EXPECT_EQ(s.unmatched, 1U);
  EXPECT_EQ(s.bytes.bytes(), 48U + 48U);
  const DecodedStream d = decode_stream(s.bytes, s.end);
  expect_messages(d, {{0, 48, MessageKind::control, "gloo notify send ready"},
                      {48, 48 + 4048, MessageKind::data, "gloo send unbound buffer"}});
}

TEST(FramingGloo, ANotificationIsItsOwnMessageNotMergedIntoTheDataOp) {
  Sent s;
  s.call(gloo_op(3, 4, 16384));  // NOTIFY_RECV_READY
  s.call(gloo_op(2, 4, 16384));  // NOTIFY_SEND_READY
  s.write(gloo_op(1, 4, 16384), 1 << 20);
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::gloo);
  EXPECT_EQ(d.decoded_until, s.end());
  EXPECT_EQ(d.note, "");
  expect_messages(d, {{0, 48, MessageKind::control, "gloo notify recv ready"},
                      {48, 96, MessageKind::control, "gloo notify send ready"},
                      {96, 96 + 16432, MessageKind::data, "gloo send unbound buffer"}});
}

TEST(FramingGloo, PartialWritesContinueTheSameOp) {
  Sent s;
  for (int i = 0; i < 3; ++i) {
    s.call(gloo_op(2, static_cast<std::uint64_t>(i), 100000));
    s.write(gloo_op(1, static_cast<std::uint64_t>(i), 100000), 7000);  // 15 calls, the last one short
  }
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::gloo);
  ASSERT_EQ(d.messages.size(), 6U) << show(d.messages);
  EXPECT_EQ(d.messages[1].end - d.messages[1].begin, 100048U);
  EXPECT_EQ(d.messages[5].end, s.end());
  EXPECT_EQ(d.note, "");
}

TEST(FramingGloo, ANewerGlooSendsItsSequenceNumberFirst) {
  Sent s;
  Bytes seq;
  put_le(seq, 3, 8);
  s.call(seq);  // device.cc connectAsInitiator: write<sequence_number_t>
  s.call(gloo_op(2, 0, 40));
  s.call(gloo_op(1, 0, 40));
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::gloo);
  expect_messages(d, {{0, 8, MessageKind::control, "gloo sequence number"},
                      {8, 56, MessageKind::control, "gloo notify send ready"},
                      {56, 56 + 88, MessageKind::data, "gloo send unbound buffer"}});
}

TEST(FramingGloo, StopsWhereAPreambleWasNotSampledAndSaysWhere) {
  Sent s;
  s.call(gloo_op(2, 0, 100));
  // Two ops in one call (no Gloo sender does this): the second preamble is mid-call.
  s.call(cat(gloo_op(1, 0, 100), gloo_op(1, 1, 100)));
  s.call(gloo_op(2, 2, 100));
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::gloo);
  expect_messages(d, {{0, 48, MessageKind::control, "gloo notify send ready"},
                      {48, 196, MessageKind::data, "gloo send unbound buffer"}});
  EXPECT_EQ(d.decoded_until, 196U);
  EXPECT_NE(d.note.find("offset 196"), std::string::npos) << d.note;
}

TEST(FramingGloo, AStreamThatEndsMidOpEndsItsLastMessageThere) {
  Sent s;
  s.call(gloo_op(2, 0, 100000));
  Bytes op = gloo_op(1, 0, 100000);
  op.resize(5000);
  s.call(op);
  const DecodedStream d = decode(s);
  ASSERT_EQ(d.messages.size(), 2U);
  EXPECT_EQ(d.messages[1].end, s.end());
  EXPECT_FALSE(d.note.empty());
}

// --- ZeroMQ -----------------------------------------------------------------

struct ZFrame {
  Bytes body;
  bool more = false;
  bool command = false;
};

// libzmq's encoder_base_t::encode, v3_1_encoder_t and stream_engine_base_t::out_event,
// step for step: frames go into an out_batch_size buffer, a body that fills a
// whole buffer is written from the message itself, a partial write is finished
// before the encoder is asked for more.
class ZmqEngine {
 public:
  ZmqEngine(Sent& out, std::size_t kernel_limit) : out_(out), kernel_(kernel_limit) {}

  void queue(std::vector<ZFrame> msg) {
    for (auto& f : msg) pipe_.push_back(std::move(f));
  }
  // Runs out_event until there is nothing left to write.
  void flush() {
    for (int guard = 0; guard < 100000; ++guard) {
      if (outpos_ == batch_.size()) {
        batch_.clear();
        outpos_ = 0;
        bool own = true;  // _outpos == NULL: the encoder uses its own buffer
        if (encode(true, kBatch) > 0) own = false;
        while (batch_.size() < kBatch && !pipe_.empty()) {
          load(pipe_.front());
          pipe_.pop_front();
          encode(own, own ? kBatch : kBatch - batch_.size());
          own = false;
        }
        if (batch_.empty()) return;
      }
      const std::size_t n = std::min(kernel_, batch_.size() - outpos_);
      out_.call(batch_.data() + outpos_, n);
      outpos_ += n;
    }
    FAIL() << "engine model did not finish";
  }

 private:
  static constexpr std::size_t kBatch = 8192;

  void load(const ZFrame& f) {
    frame_ = f;
    header_.clear();
    const std::uint8_t flags = static_cast<std::uint8_t>((f.more ? 1 : 0) | (f.body.size() > 255 ? 2 : 0) | (f.command ? 4 : 0));
    header_.push_back(flags);
    if (f.body.size() > 255) {
      put_be(header_, f.body.size(), 8);
    } else {
      header_.push_back(static_cast<std::uint8_t>(f.body.size()));
    }
    in_progress_ = true;
    src_ = &header_;
    pos_ = 0;
    to_write_ = header_.size();
    new_msg_ = false;
  }
  std::size_t encode(bool own, std::size_t size) {
    if (!in_progress_) return 0;
    std::size_t pos = 0;
    while (pos < size) {
      if (to_write_ == 0) {
        if (new_msg_) {
          in_progress_ = false;
          break;
        }
        src_ = &frame_.body;  // size_ready: the body next
        pos_ = 0;
        to_write_ = frame_.body.size();
        new_msg_ = true;
      }
      if (pos == 0 && own && to_write_ >= size) {  // zero-copy
        batch_.insert(batch_.end(), src_->begin() + static_cast<std::ptrdiff_t>(pos_), src_->end());
        pos = to_write_;
        to_write_ = 0;
        return pos;
      }
      const std::size_t take = std::min(to_write_, size - pos);
      batch_.insert(batch_.end(), src_->begin() + static_cast<std::ptrdiff_t>(pos_),
                    src_->begin() + static_cast<std::ptrdiff_t>(pos_ + take));
      pos_ += take;
      to_write_ -= take;
      pos += take;
    }
    return pos;
  }

  Sent& out_;
  std::size_t kernel_;
  std::deque<ZFrame> pipe_;
  ZFrame frame_;
  Bytes header_;
  const Bytes* src_ = nullptr;
  std::size_t pos_ = 0, to_write_ = 0;
  bool new_msg_ = false, in_progress_ = false;
  Bytes batch_;
  std::size_t outpos_ = 0;
};

// zmtp_engine.cpp plug_internal and receive_greeting_versioned: the signature,
// then the major version once the peer's signature is in, then the rest.
void zmtp_greeting(Sent& s, const char* mechanism = "NULL") {
  Bytes sig = {0xff};
  put_be(sig, 1, 8);  // routing id size + 1
  sig.push_back(0x7f);
  s.call(sig);
  s.call(Bytes{3});
  Bytes rest = {1};
  Bytes mech(20, 0);
  std::memcpy(mech.data(), mechanism, std::strlen(mechanism));
  rest = cat(rest, mech);
  rest.resize(rest.size() + 32, 0);
  s.call(rest);
}

ZFrame ready_command() {
  Bytes b = {5};
  b = cat(b, text("READY"));
  b.push_back(11);
  b = cat(b, text("Socket-Type"));
  put_be(b, 6, 4);
  b = cat(b, text("DEALER"));
  return {b, false, true};
}

TEST(FramingZmtp, GreetingCommandsAndMultipartMessagesWithZeroCopyBodies) {
  Sent s;
  zmtp_greeting(s);
  ZmqEngine engine(s, 65536);
  engine.queue({ready_command()});
  engine.flush();
  engine.queue({{text("hello")}});
  engine.flush();
  engine.queue({{filled(10, 'm'), true}, {filled(100000, 1)}});  // a small header frame, then a tensor
  engine.flush();
  engine.queue({{filled(300000, 2)}});
  engine.flush();
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::zmtp);
  EXPECT_EQ(d.note, "");
  const std::uint64_t r = 64 + 2 + ready_command().body.size();
  expect_messages(d, {{0, 64, MessageKind::control, "zmtp greeting"},
                      {64, r, MessageKind::control, "zmtp READY"},
                      {r, r + 7, MessageKind::data, "zmq message"},
                      {r + 7, r + 7 + 12 + 9 + 100000, MessageKind::data, "zmq message"},
                      {r + 7 + 12 + 9 + 100000, s.end(), MessageKind::data, "zmq message"}});
  EXPECT_EQ(d.messages[3].parts, 2U);
  EXPECT_EQ(d.decoded_until, s.end());
}

TEST(FramingZmtp, StopsAtTheFirstFrameHeaderInsideABatchAndKeepsWholeMessages) {
  Sent s;
  zmtp_greeting(s);
  ZmqEngine engine(s, 1 << 20);
  engine.queue({ready_command()});
  engine.flush();
  // Three small messages queued at once: one 8 KiB-bounded write holds them all.
  engine.queue({{filled(10, 'a')}});
  engine.queue({{filled(40, 'b'), true}, {filled(40, 'c')}});
  engine.queue({{filled(10, 'd')}});
  engine.flush();
  const DecodedStream d = decode(s);
  const std::uint64_t m = 64 + 2 + ready_command().body.size();
  // The first message's header is the call's first byte and the second's lies
  // inside the head; the second message's second frame header (at +12+42) does not.
  expect_messages(d, {{0, 64, MessageKind::control, "zmtp greeting"},
                      {64, m, MessageKind::control, "zmtp READY"},
                      {m, m + 12, MessageKind::data, "zmq message"}});
  EXPECT_EQ(d.decoded_until, m + 12);
  EXPECT_NE(d.note.find("not sampled"), std::string::npos) << d.note;
}

TEST(FramingZmtp, TheGreetingLengthFollowsThePeersRevision) {
  // Against a ZMTP 2.0 peer, libzmq's greeting is 12 bytes (revision, socket
  // type) and frames follow at once.
  Sent s, peer;
  Bytes sig = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};
  s.call(cat(sig, Bytes{3, 5}));  // revision 3, socket type DEALER
  peer.call(cat(sig, Bytes{1, 6}));
  s.call(Bytes{0, 3, 'a', 'b', 'c'});
  const DecodedStream d = decode(s, &peer);
  expect_messages(d, {{0, 12, MessageKind::control, "zmtp greeting"}, {12, 17, MessageKind::data, "zmq message"}});
  EXPECT_EQ(d.decoded_until, s.end());
}

TEST(FramingZmtp, AnEncryptedMechanismIsNotWalked) {
  Sent s;
  zmtp_greeting(s, "CURVE");
  s.call(Bytes{4, 5, 5, 'H', 'E', 'L', 'L'});
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::zmtp);
  EXPECT_EQ(d.decoded_until, 64U);
  EXPECT_FALSE(d.note.empty());
}

// --- OpenMPI ----------------------------------------------------------------

// btl_tcp_endpoint.c send_connect_ack: process name, then "OPAL-TCP-BTL" in 16
// bytes whose tail strcpy leaves as it was.
Bytes mpi_handshake() {
  Bytes b;
  put_le(b, 0x1234, 4);
  put_le(b, 1, 4);
  b = cat(b, text("OPAL-TCP-BTL"));
  b.push_back(0);
  b = cat(b, Bytes{0xde, 0xad, 0xbe});
  return b;
}

// btl_tcp.c mca_btl_tcp_send: the 8-byte header (host order), then the payload.
Bytes btl(std::uint8_t tag, const Bytes& payload) {
  Bytes b = {tag, 1};
  put_le(b, 0, 2);
  put_le(b, payload.size(), 4);
  return cat(b, payload);
}

// pml_ob1_hdr.h: match (14 bytes on the wire for an eager send), rendezvous (32), frag (32).
Bytes ob1_match(std::size_t data) {
  Bytes b = {0x41, 0};
  put_le(b, 0, 2);
  put_le(b, 1, 4);
  put_le(b, 7, 4);
  put_le(b, 1, 2);
  b.resize(b.size() + data, 0x11);
  return b;
}
Bytes ob1_rndv(std::uint64_t total, std::size_t eager, std::uint64_t request) {
  Bytes b = {0x42, 1};
  put_le(b, 0, 2);
  put_le(b, 1, 4);
  put_le(b, 7, 4);
  put_le(b, 2, 2);
  put_le(b, 0, 2);
  put_le(b, total, 8);
  put_le(b, request, 8);
  b.resize(b.size() + eager, 0x22);
  return b;
}
Bytes ob1_frag(std::uint64_t offset, std::uint64_t request, std::size_t data) {
  Bytes b = {0x46, 0};
  b.resize(8, 0);
  put_le(b, offset, 8);
  put_le(b, request, 8);
  put_le(b, 0x7fff0000, 8);
  b.resize(b.size() + data, 0x33);
  return b;
}
Bytes ob1_fin() {
  Bytes b = {0x49, 0};
  b.resize(8, 0);
  put_le(b, 0x1000, 8);
  put_le(b, 4096, 8);
  return b;
}

TEST(FramingOpenMpi, ARendezvousIsItsHeaderThenItsDataAfterTheAck) {
  Sent s;
  s.call(mpi_handshake());
  s.write(btl(0x41, ob1_match(100)), 1 << 20);
  const std::uint64_t total = 300000, eager = 65504;
  const std::uint64_t rndv_at = s.end();
  s.write(btl(0x42, ob1_rndv(total, eager, 0xabc0)), 65536);
  const std::uint64_t match_at = s.end();
  s.write(btl(0x41, ob1_match(50)), 65536);  // passes while the receiver's ACK is on its way
  const std::uint64_t frag_at = s.end();
  s.write(btl(0x46, ob1_frag(eager, 0xabc0, 131040)), 65536);
  s.write(btl(0x46, ob1_frag(eager + 131040, 0xabc0, total - eager - 131040)), 65536);
  const std::uint64_t fin_at = s.end();
  s.call(btl(0x49, ob1_fin()));
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::openmpi);
  EXPECT_EQ(d.note, "");
  // The header (with its eager part) and the data that follows the receiver's ACK
  // are two messages: the sender waited in between.
  expect_messages(d, {{0, 24, MessageKind::control, "mpi connect ack"},
                      {24, rndv_at, MessageKind::data, "mpi eager"},
                      {rndv_at, match_at, MessageKind::data, "mpi rendezvous"},
                      {match_at, frag_at, MessageKind::data, "mpi eager"},
                      {frag_at, fin_at, MessageKind::data, "mpi rendezvous data"},
                      {fin_at, s.end(), MessageKind::control, "mpi fin"}});
  EXPECT_EQ(d.messages[4].parts, 2U);
  EXPECT_EQ(d.messages[4].bytes, fin_at - frag_at);
  EXPECT_EQ(d.decoded_until, s.end());
}

TEST(FramingOpenMpi, ARendezvousStillOpenAtTheEndIsLeftToTheFallback) {
  Sent s;
  s.call(mpi_handshake());
  const std::uint64_t rndv_at = s.end();
  s.write(btl(0x42, ob1_rndv(1 << 20, 1000, 1)), 65536);
  s.write(btl(0x41, ob1_match(10)), 65536);
  const DecodedStream d = decode(s);
  expect_messages(d, {{0, 24, MessageKind::control, "mpi connect ack"}});
  EXPECT_EQ(d.decoded_until, rndv_at);
  EXPECT_NE(d.note.find("rendezvous"), std::string::npos) << d.note;
}

TEST(FramingOpenMpi, TheReceiversAcksAreControl) {
  Sent s;
  s.call(mpi_handshake());
  Bytes ack = {0x44, 0};
  ack.resize(40, 0);
  s.call(btl(0x44, ack));
  const DecodedStream d = decode(s);
  expect_messages(d, {{0, 24, MessageKind::control, "mpi connect ack"}, {24, 24 + 48, MessageKind::control, "mpi ack"}});
}

// --- tensorwire's data plane --------------------------------------------------

TEST(FramingTensorwire, HelloThenOneMessagePerFrame) {
  Sent s;
  const std::string hello = frame::encode_hello({1, 0, 42, "token"});
  s.call(Bytes(hello.begin(), hello.end()));
  std::uint64_t at = s.end();
  std::vector<Want> want = {{0, at, MessageKind::control, "tensorwire hello"}};
  for (const std::uint64_t len : {std::uint64_t{24}, std::uint64_t{1000}, std::uint64_t{200000}}) {
    Bytes m(len, 0x5a);
    frame::encode_header({0, 3, len}, std::span<std::byte, frame::kHeaderSize>(reinterpret_cast<std::byte*>(m.data()), frame::kHeaderSize));
    s.write(m, 65536);
    want.push_back({at, at + len, MessageKind::data, "tensorwire message"});
    at += len;
  }
  const DecodedStream d = decode(s);
  EXPECT_EQ(d.transport, Transport::tensorwire);
  expect_messages(d, want);
  EXPECT_EQ(d.decoded_until, s.end());

  Sent back;
  const auto acc = frame::encode_accept(frame::AcceptStatus::ok);
  back.call(reinterpret_cast<const std::uint8_t*>(acc.data()), acc.size());
  expect_messages(decode(back), {{0, 8, MessageKind::control, "tensorwire accept"}});
}

// --- Real streams -------------------------------------------------------------

struct Fixture {
  SparseBytes samples;
  std::uint64_t end = 0;
  std::vector<std::uint64_t> calls;
};

Fixture load_fixture(const std::string& name) {
  const std::string path = std::string(TW_SOURCE_DIR) + "/tests/unit/framing/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  Fixture f;
  std::string line;
  auto unhex = [](const std::string& h) {
    Bytes b;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(static_cast<std::uint8_t>(std::stoul(h.substr(i, 2), nullptr, 16)));
    return b;
  };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::uint64_t n = 0;
    std::string head, tail;
    ls >> n >> head >> tail;
    const Bytes h = unhex(head);
    f.samples.add(f.end, h.data(), h.size());
    if (tail != "?" && tail != "-") {
      const Bytes t = unhex(tail);
      f.samples.add(f.end + n - t.size(), t.data(), t.size());
    }
    f.calls.push_back(n);
    f.end += n;
  }
  return f;
}

TEST(FramingReal, Torch113GlooPairIsOneMessagePerOpOnBothSides) {
  for (const char* name : {"gloo-torch1.13-rank0.txt", "gloo-torch1.13-rank1.txt"}) {
    const Fixture f = load_fixture(name);
    const DecodedStream d = decode_stream(f.samples, f.end);
    check_invariants(d, f.end);
    EXPECT_EQ(d.transport, Transport::gloo) << name;
    EXPECT_EQ(d.decoded_until, f.end) << name << ": " << d.note;
    // Every Gloo op went out in one writev here: one message per call. A
    // notification is 48 bytes; so is the barrier's empty send at the end.
    ASSERT_EQ(d.messages.size(), f.calls.size()) << name;
    std::uint64_t at = 0;
    std::size_t notifications = 0;
    for (std::size_t i = 0; i < f.calls.size(); ++i) {
      EXPECT_EQ(d.messages[i].begin, at);
      EXPECT_EQ(d.messages[i].end, at + f.calls[i]);
      if (d.messages[i].kind == MessageKind::control) {
        EXPECT_EQ(f.calls[i], 48U);
        ++notifications;
      }
      at += f.calls[i];
    }
    EXPECT_EQ(d.messages.back().what, std::string("gloo send unbound buffer")) << name;
    EXPECT_EQ(d.messages.back().end - d.messages.back().begin, 48U) << name;
    EXPECT_GE(notifications, f.calls.size() / 2) << name;
  }
  const DecodedStream d = decode_stream(load_fixture("gloo-torch1.13-rank0.txt").samples, 4252);
  ASSERT_GE(d.messages.size(), 3U);
  EXPECT_EQ(d.messages[0].what, std::string("gloo notify recv ready"));
  EXPECT_EQ(d.messages[1].what, std::string("gloo notify send ready"));
  EXPECT_EQ(d.messages[2].what, std::string("gloo send unbound buffer"));
}

TEST(FramingReal, PyzmqDealerDecodesUntilAHeaderInsideABatch) {
  const Fixture f = load_fixture("zmq-pyzmq-libzmq4.3.4-dealer.txt");
  const DecodedStream d = decode_stream(f.samples, f.end);
  check_invariants(d, f.end);
  EXPECT_EQ(d.transport, Transport::zmtp);
  // [b"hello"], [10 B, 100000 B] decoded; [20 B, 5000 B, 300 B] has its third
  // frame's header mid-write (offset 105166), so it and the rest are left.
  expect_messages(d, {{0, 64, MessageKind::control, "zmtp greeting"},
                      {64, 107, MessageKind::control, "zmtp READY"},
                      {107, 114, MessageKind::data, "zmq message"},
                      {114, 100135, MessageKind::data, "zmq message"}});
  EXPECT_EQ(d.decoded_until, 100135U);
  EXPECT_NE(d.note.find("105166"), std::string::npos) << d.note;
}

// A message spanning send calls [first, last] of a fixture.
struct CallSpan {
  std::size_t first, last;
  MessageKind kind;
  std::string what;
};

void expect_call_spans(const Fixture& f, const DecodedStream& d, const std::vector<CallSpan>& spans) {
  std::vector<std::uint64_t> at = {0};
  for (const std::uint64_t n : f.calls) at.push_back(at.back() + n);
  std::vector<Want> want;
  for (const auto& c : spans) want.push_back({at[c.first], at[c.last + 1], c.kind, c.what});
  expect_messages(d, want);
}

TEST(FramingReal, OpenMpi414SenderSplitsEachRendezvousIntoHeaderAndPut) {
  // mpi4py Send of 100 B, 1 MiB, 3000 B, 300000 B, then Barrier, over
  // --mca btl tcp,self --mca pml ob1: large messages go as RNDV (header only),
  // the receiver's PUT request, the sender's BTL PUT of the data, then FIN.
  const Fixture f = load_fixture("openmpi-4.1.4-rank0.txt");
  const DecodedStream d = decode_stream(f.samples, f.end);
  check_invariants(d, f.end);
  EXPECT_EQ(d.transport, Transport::openmpi);
  EXPECT_EQ(d.note, "");
  EXPECT_EQ(d.decoded_until, f.end);
  expect_call_spans(f, d, {{0, 0, MessageKind::control, "mpi connect ack"},
                           {1, 1, MessageKind::data, "mpi eager"},
                           {2, 2, MessageKind::data, "mpi rendezvous"},
                           {3, 3, MessageKind::data, "mpi rendezvous data"},
                           {4, 4, MessageKind::control, "mpi fin"},
                           {5, 5, MessageKind::data, "mpi eager"},
                           {6, 6, MessageKind::data, "mpi rendezvous"},
                           {7, 7, MessageKind::data, "mpi rendezvous data"},
                           {8, 8, MessageKind::control, "mpi fin"},
                           {9, 9, MessageKind::data, "mpi eager"}});
  EXPECT_EQ(d.messages[3].end - d.messages[3].begin, 24U + (1U << 20));

  const Fixture r = load_fixture("openmpi-4.1.4-rank1.txt");
  const DecodedStream e = decode_stream(r.samples, r.end);
  check_invariants(e, r.end);
  expect_call_spans(r, e, {{0, 0, MessageKind::control, "mpi connect ack"},
                           {1, 1, MessageKind::control, "mpi put"},
                           {2, 2, MessageKind::control, "mpi put"},
                           {3, 3, MessageKind::data, "mpi eager"}});
}

TEST(FramingReal, TorchTcpStoreTrafficIsNoKnownFraming) {
  const Fixture f = load_fixture("tcpstore-torch1.13-rank0.txt");
  const DecodedStream d = decode_stream(f.samples, f.end);
  EXPECT_EQ(d.transport, Transport::unknown) << show(d.messages);
  EXPECT_EQ(d.decoded_until, 0U);
}

// --- Not the protocol, and garbage ---------------------------------------------

TEST(FramingDetect, OtherBytesAreNotTakenForAKnownFraming) {
  for (const std::string& t : {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string(4096, '\0'), std::string(100, '\xff'),
                               std::string("\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7e rest", 15),
                               std::string("\xffgarbage!\x7f\x03\x01NULL", 17)}) {
    Sent s;
    s.call(text(t));
    const DecodedStream d = decode(s);
    EXPECT_EQ(d.transport, Transport::unknown) << t;
    EXPECT_EQ(d.decoded_until, 0U);
  }
  // A Gloo-like preamble whose opcode is out of range, or whose length disagrees.
  Bytes bad = gloo_op(1, 0, 100);
  bad[8] = 4;
  Sent a;
  a.call(bad);
  EXPECT_EQ(decode(a).transport, Transport::unknown);
  Bytes bad_length = gloo_op(1, 0, 0);  // an empty send: head and tail hold all of its 48 bytes
  bad_length[32] = 5;
  Sent b;
  b.call(bad_length);
  EXPECT_EQ(decode(b).transport, Transport::unknown);
  // A first byte that was never sampled.
  EXPECT_EQ(decode_stream(SparseBytes{}, 100).transport, Transport::unknown);
}

TEST(FramingDetect, GarbageAndDamagedStreamsNeverBreakTheInvariants) {
  std::mt19937_64 rng(12);
  std::vector<Sent> seeds(4);
  zmtp_greeting(seeds[0]);
  seeds[0].call(Bytes{0, 3, 'a', 'b', 'c', 1, 2, 'x', 'y', 2, 0, 0, 0, 0, 0, 0, 0, 2, 'p', 'q'});
  seeds[1].call(gloo_op(2, 0, 64));
  seeds[1].call(gloo_op(1, 0, 64));
  seeds[2].call(mpi_handshake());
  seeds[2].call(btl(0x42, ob1_rndv(500, 10, 1)));
  seeds[2].call(btl(0x46, ob1_frag(10, 1, 490)));
  const std::string hello = frame::encode_hello({1, 0, 42, "t"});
  seeds[3].call(Bytes(hello.begin(), hello.end()));
  for (int round = 0; round < 3000; ++round) {
    Bytes stream;
    if (round % 3 == 0) {
      stream.resize(rng() % 600);
      for (auto& b : stream) b = static_cast<std::uint8_t>(rng());
    } else {
      stream = seeds[rng() % seeds.size()].bytes;
      for (int k = static_cast<int>(rng() % 4); k >= 0 && !stream.empty(); --k) stream[rng() % stream.size()] = static_cast<std::uint8_t>(rng());
    }
    Sent s;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t n = std::min<std::size_t>(stream.size() - at, 1 + rng() % 80);
      s.call(stream.data() + at, n);
      at += n;
    }
    // Sometimes claim a longer stream than was sampled.
    const SparseBytes sampled = s.samples();
    const std::uint64_t end = s.end() + (round % 5 == 0 ? rng() % 100000 : 0);
    const DecodedStream d = decode_stream(sampled, end, &sampled);
    check_invariants(d, end);
  }
}

}  // namespace
}  // namespace tw::framing

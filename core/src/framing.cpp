#include "tensorwire/core/framing.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <string_view>

#include "tensorwire/core/frame.hpp"

namespace tw::framing {

void SparseBytes::add(std::uint64_t offset, const std::uint8_t* bytes, std::size_t n) {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  if (n == 0 || bytes == nullptr) return;
  if (n > kMax - offset) n = static_cast<std::size_t>(kMax - offset);
  const std::uint64_t last = offset + n;
  std::uint64_t pos = offset;
  auto after = [](std::uint64_t o, const Piece& p) { return o < p.offset; };
  // Each pass either skips a piece already known or fills the gap before the
  // next one, so the loop ends after at most (pieces overlapped + 1) fills.
  while (pos < last) {
    const auto next = std::upper_bound(pieces_.begin(), pieces_.end(), pos, after);
    Piece* prev = next == pieces_.begin() ? nullptr : &*std::prev(next);
    if (prev && prev->offset + prev->size > pos) {
      pos = prev->offset + prev->size;
      continue;
    }
    std::uint64_t stop = next == pieces_.end() ? last : std::min(last, next->offset);
    constexpr std::uint64_t kPieceMax = std::numeric_limits<std::uint32_t>::max() / 2;
    if (stop - pos > kPieceMax) stop = pos + kPieceMax;
    const auto* from = bytes + (pos - offset);
    const auto len = static_cast<std::uint32_t>(stop - pos);
    if (prev && prev->offset + prev->size == pos && prev->at + prev->size == pool_.size() &&
        prev->size <= kPieceMax) {
      prev->size += len;  // continues the last piece added: one piece, not two
    } else {
      pieces_.insert(next, Piece{pos, pool_.size(), len});
    }
    pool_.insert(pool_.end(), from, from + len);
    pos = stop;
  }
}

bool SparseBytes::add_sample(const trace::SampleEvent& s, std::uint64_t call_bytes) {
  if (s.head_len > trace::kSampleHead || s.tail_len > trace::kSampleTail) return false;
  if (s.head_len > call_bytes || s.tail_len > call_bytes - s.head_len) return false;
  if (call_bytes > std::numeric_limits<std::uint64_t>::max() - s.offset) return false;
  add(s.offset, s.head, s.head_len);
  add(s.offset + call_bytes - s.tail_len, s.tail, s.tail_len);
  return true;
}

bool SparseBytes::read_into(std::uint64_t offset, std::span<std::uint8_t> out) const {
  if (out.size() > std::numeric_limits<std::uint64_t>::max() - offset) return false;
  auto after = [](std::uint64_t o, const Piece& p) { return o < p.offset; };
  std::size_t done = 0;
  // Pieces may abut: each pass copies at least one byte or fails.
  while (done < out.size()) {
    const std::uint64_t at = offset + done;
    auto it = std::upper_bound(pieces_.begin(), pieces_.end(), at, after);
    if (it == pieces_.begin()) return false;
    --it;
    const std::uint64_t piece_end = it->offset + it->size;
    if (piece_end <= at) return false;
    const auto from = static_cast<std::size_t>(at - it->offset);
    const std::size_t take = std::min<std::size_t>(out.size() - done, it->size - from);
    std::memcpy(out.data() + done, pool_.data() + it->at + from, take);
    done += take;
  }
  return true;
}

std::optional<std::vector<std::uint8_t>> SparseBytes::read(std::uint64_t offset, std::size_t n) const {
  std::vector<std::uint8_t> out;
  // Check first, so that no allocation follows an n nothing could satisfy.
  if (n > pool_.size()) return std::nullopt;
  out.resize(n);
  if (!read_into(offset, out)) return std::nullopt;
  return out;
}

SentStream sent_stream(std::span<const trace::Event> io, std::span<const trace::SampleEvent> samples, std::uint32_t conn) {
  SentStream out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;  // (offset, bytes moved)
  for (const trace::Event& e : io) {
    if (e.kind != trace::Kind::send || e.conn != conn || e.result <= 0 || (e.flags & trace::kFlagError)) continue;
    const auto n = static_cast<std::uint64_t>(e.result);
    if (n > std::numeric_limits<std::uint64_t>::max() - e.offset) continue;
    calls.emplace_back(e.offset, n);
    out.end = std::max(out.end, e.offset + n);
  }
  std::sort(calls.begin(), calls.end());
  for (const trace::SampleEvent& s : samples) {
    if (s.kind != trace::Kind::sample || s.conn != conn) continue;
    const auto it = std::lower_bound(calls.begin(), calls.end(), std::make_pair(s.offset, std::uint64_t{0}));
    if (it == calls.end() || it->first != s.offset || !out.bytes.add_sample(s, it->second)) ++out.unmatched;
  }
  return out;
}

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::gloo: return "gloo";
    case Transport::zmtp: return "zmtp";
    case Transport::openmpi: return "openmpi";
    case Transport::tensorwire: return "tensorwire";
    case Transport::unknown: break;
  }
  return "unknown";
}

const char* kind_name(MessageKind k) { return k == MessageKind::control ? "control" : "data"; }

namespace {

// Little- and big-endian integers of up to 8 bytes from the samples.
class View {
 public:
  explicit View(const SparseBytes& s) : s_(s) {}
  std::optional<std::uint64_t> le(std::uint64_t o, std::size_t n) const {
    std::array<std::uint8_t, 8> b{};
    if (!s_.read_into(o, std::span<std::uint8_t>(b.data(), n))) return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    return v;
  }
  std::optional<std::uint64_t> be(std::uint64_t o, std::size_t n) const {
    std::array<std::uint8_t, 8> b{};
    if (!s_.read_into(o, std::span<std::uint8_t>(b.data(), n))) return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = (v << 8) | b[i];
    return v;
  }
  std::optional<std::uint8_t> u8(std::uint64_t o) const {
    const auto v = le(o, 1);
    if (!v) return std::nullopt;
    return static_cast<std::uint8_t>(*v);
  }
  bool equals(std::uint64_t o, std::string_view text) const {
    std::array<std::uint8_t, 32> b{};
    if (text.size() > b.size() || !s_.read_into(o, std::span<std::uint8_t>(b.data(), text.size()))) return false;
    return std::memcmp(b.data(), text.data(), text.size()) == 0;
  }

 private:
  const SparseBytes& s_;
};

std::string at(const char* what, std::uint64_t offset) { return std::string(what) + " at offset " + std::to_string(offset); }

// Builds a DecodedStream, keeping decoded_until at a message boundary.
struct Out {
  DecodedStream d;
  void emit(std::uint64_t begin, std::uint64_t end, MessageKind kind, const char* what, std::uint32_t parts = 1) {
    d.messages.push_back({begin, end, kind, what, end - begin, parts});
    d.decoded_until = end;
  }
  DecodedStream stop(std::string why) {
    if (d.note.empty()) {
      d.note = std::move(why);
    } else {
      d.note += "; " + why;
    }
    return std::move(d);
  }
  DecodedStream done() { return std::move(d); }
};

// --- Gloo (gloo/transport/tcp/pair.{h,cc}) -----------------------------------
// Every op is written as one writev of its 48-byte preamble (six native size_t:
// nbytes, opcode, slot, offset, length, roffset) and, for a data op, its buffer;
// a partial write continues the same op, and ops go out one after the other, so
// each op starts a send call and its preamble's first 32 bytes are in the head.

constexpr std::uint64_t kGlooPreamble = 48;

enum class Check { ok, unsampled, invalid, truncated };

struct GlooOp {
  std::uint64_t nbytes = 0;
  std::uint64_t opcode = 0;
};

Check gloo_op(const View& v, std::uint64_t o, std::uint64_t end, GlooOp& op) {
  const auto nbytes = v.le(o, 8), opcode = v.le(o + 8, 8);
  if (!nbytes || !opcode) return Check::unsampled;
  if (*opcode > 3 || *nbytes < kGlooPreamble) return Check::invalid;
  if (*opcode >= 2 && *nbytes != kGlooPreamble) return Check::invalid;  // notifications are a bare preamble
  if (*opcode <= 1) {
    if (const auto length = v.le(o + 32, 8); length && *length != *nbytes - kGlooPreamble) return Check::invalid;
  }
  op = {*nbytes, *opcode};
  return *nbytes > end - o ? Check::truncated : Check::ok;
}

const char* gloo_label(std::uint64_t opcode) {
  switch (opcode) {
    case 0: return "gloo send buffer";
    case 1: return "gloo send unbound buffer";
    case 2: return "gloo notify send ready";
    default: return "gloo notify recv ready";
  }
}

// Where the first op starts: 0, or 8 after the sequence number a newer Gloo's
// connecting side writes first (device.cc connectAsInitiator); nothing if the
// stream does not look like Gloo.
std::optional<std::uint64_t> gloo_start(const View& v, std::uint64_t end) {
  for (const std::uint64_t start : {std::uint64_t{0}, std::uint64_t{8}}) {
    if (start != 0) {
      const auto seq = v.le(0, 8);
      if (!seq || *seq > 0x7fffffffU) return std::nullopt;
    }
    if (start >= end) return std::nullopt;
    GlooOp op;
    if (gloo_op(v, start, end, op) != Check::ok) continue;
    // A second preamble, where sampled, must hold too: two in a row are not chance.
    const std::uint64_t next = start + op.nbytes;
    GlooOp second;
    const Check c = next < end ? gloo_op(v, next, end, second) : Check::ok;
    if (c == Check::invalid) continue;
    return start;
  }
  return std::nullopt;
}

DecodedStream decode_gloo(const View& v, std::uint64_t end, std::uint64_t start) {
  Out out;
  out.d.transport = Transport::gloo;
  if (start == 8) out.emit(0, 8, MessageKind::control, "gloo sequence number");
  std::uint64_t o = start;
  while (o < end) {
    GlooOp op;
    switch (gloo_op(v, o, end, op)) {
      case Check::unsampled: return out.stop(at("gloo preamble not sampled", o));
      case Check::invalid: return out.stop(at("not a gloo preamble", o));
      case Check::truncated:
        out.emit(o, end, op.opcode <= 1 ? MessageKind::data : MessageKind::control, gloo_label(op.opcode));
        return out.stop(at("stream ends inside the gloo op", o));
      case Check::ok: break;
    }
    out.emit(o, o + op.nbytes, op.opcode <= 1 ? MessageKind::data : MessageKind::control, gloo_label(op.opcode));
    o += op.nbytes;
  }
  return out.done();
}

// --- ZeroMQ (libzmq zmtp_engine.cpp, v2_encoder.cpp, v3_1_encoder.cpp) -------
// Greeting: signature 0xFF, 8 bytes, 0x7F; then the major version; then for
// ZMTP 3 the minor version, a 20-byte mechanism and 32 bytes (64 in all), for a
// ZMTP 1/2 peer the socket type (12 in all). Then frames: a flags byte (MORE 1,
// LONG 2, COMMAND 4), a size (1 byte, or 8 big-endian when LONG), the body.
// The encoder batches frames into out_batch_size (8 KiB) writes and writes a
// large body from the message itself, so a header may sit mid-call, unsampled.

constexpr std::uint64_t kZmtpSignature = 10;

const char* zmtp_command(const View& v, std::uint64_t body, std::uint64_t size) {
  static constexpr std::array<const char*, 10> kNames = {"READY", "PING", "PONG", "SUBSCRIBE", "CANCEL",
                                                         "ERROR", "HELLO", "WELCOME", "INITIATE", "MESSAGE"};
  static constexpr std::array<const char*, 10> kLabels = {"zmtp READY", "zmtp PING", "zmtp PONG", "zmtp SUBSCRIBE",
                                                          "zmtp CANCEL", "zmtp ERROR", "zmtp HELLO", "zmtp WELCOME",
                                                          "zmtp INITIATE", "zmtp MESSAGE"};
  const auto len = size > 0 ? v.u8(body) : std::nullopt;
  if (len && *len + 1U <= size) {
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      if (std::strlen(kNames[i]) == *len && v.equals(body + 1, kNames[i])) return kLabels[i];
    }
  }
  return "zmtp command";
}

// The spec lets the signature's 8 padding bytes be anything; libzmq writes its
// routing id's size + 1 (at most 256) big-endian there, and a major version of 1
// or more after it.
bool zmtp_detect(const View& v) {
  if (v.u8(0) != 0xff || v.u8(9) != 0x7f) return false;
  const auto padding = v.be(1, 8);
  if (!padding || *padding > 256) return false;
  const auto major = v.u8(kZmtpSignature);
  return !major || *major >= 1;
}

DecodedStream decode_zmtp(const View& v, std::uint64_t end, const SparseBytes* received) {
  Out out;
  out.d.transport = Transport::zmtp;
  const auto major = v.u8(kZmtpSignature);
  if (!major) return out.stop("zmtp greeting's version byte not sampled");
  std::optional<std::uint8_t> peer_revision;
  if (received) {
    const View r(*received);
    const auto r0 = r.u8(0), r9 = r.u8(9);
    // zmtp_engine.cpp receive_greeting: a peer without this signature speaks ZMTP 1.0.
    if ((r0 && *r0 != 0xff) || (r9 && !(*r9 & 1))) return out.stop("the peer speaks ZMTP 1.0 (not decoded)");
    peer_revision = r.u8(kZmtpSignature);
  }
  std::uint64_t greeting = 0;
  if (*major < 3 || (peer_revision && *peer_revision < 3)) {
    greeting = 12;  // revision and socket type: ZMTP 2.0 framing follows
  } else if (peer_revision) {
    greeting = 64;
  } else if (const auto b = v.u8(12)) {
    // Unknown peer: a mechanism name (upper case) follows a ZMTP 3 greeting's minor
    // version; a frame's flags byte (0..7) follows a 12-byte one.
    if (*b >= 'A' && *b <= 'Z') {
      greeting = 64;
    } else if (*b <= 7) {
      greeting = 12;
    }
  }
  if (greeting == 0) return out.stop("zmtp greeting's length unknown (byte 12 not sampled)");
  if (greeting == 64) {
    if (!v.equals(12, std::string_view("NULL\0\0\0\0", 8)) && !v.equals(12, std::string_view("PLAIN\0\0\0", 8))) {
      if (greeting > end) return out.stop("stream ends inside the zmtp greeting");
      out.emit(0, greeting, MessageKind::control, "zmtp greeting");
      return out.stop("zmtp mechanism is not NULL or PLAIN (encrypted or not sampled): frames not decoded");
    }
  }
  if (greeting > end) return out.stop("stream ends inside the zmtp greeting");
  out.emit(0, greeting, MessageKind::control, "zmtp greeting");

  std::uint64_t o = greeting;
  bool in_message = false;  // after a frame with MORE
  std::uint64_t message_begin = 0;
  std::uint32_t parts = 0;
  while (o < end) {
    const auto flags = v.u8(o);
    if (!flags) return out.stop(at("zmtp frame header not sampled", o));
    if (*flags & 0xf8) return out.stop(at("not a zmtp frame header", o));
    const bool more = *flags & 1, large = *flags & 2, command = *flags & 4;
    if (command && (more || in_message)) return out.stop(at("zmtp command inside a multipart message", o));
    const std::uint64_t header = large ? 9 : 2;
    const auto size = v.be(o + 1, large ? 8 : 1);
    if (!size) return out.stop(at("zmtp frame size not sampled", o));
    if (!in_message) {
      message_begin = o;
      parts = 0;
    }
    ++parts;
    if (header > end - o || *size > end - o - header) {
      out.emit(message_begin, end, command ? MessageKind::control : MessageKind::data, command ? "zmtp command" : "zmq message", parts);
      return out.stop(at("stream ends inside the zmtp frame", o));
    }
    const std::uint64_t frame_end = o + header + *size;
    if (command) {
      out.emit(o, frame_end, MessageKind::control, zmtp_command(v, o + header, *size));
      in_message = false;
    } else if (!more) {
      out.emit(message_begin, frame_end, MessageKind::data, "zmq message", parts);
      in_message = false;
    } else {
      in_message = true;
    }
    o = frame_end;
  }
  if (in_message) return out.stop(at("stream ends inside the multipart message", message_begin));
  return out.done();
}

// --- OpenMPI (opal/mca/btl/tcp, ompi/mca/pml/ob1) ----------------------------
// Each side first sends the 24-byte handshake (btl_tcp_endpoint.c
// send_connect_ack): the process name (8 bytes) and "OPAL-TCP-BTL" NUL-padded to
// 16 (the bytes after the NUL are not set). Then fragments, each written by its
// own writev (btl_tcp_frag.c; a partial write continues it): an 8-byte header
// (tag, type, count, size in host order between same-architecture peers), for
// PUT/GET count 16-byte segment descriptors, then size bytes. With the ob1 PML
// the tag is the ob1 header type and the payload starts with that header.

constexpr std::uint64_t kBtlHeader = 8;
constexpr std::uint64_t kOb1RndvHeader = 32;  // sizeof(mca_pml_ob1_rendezvous_hdr_t)
constexpr std::uint64_t kOb1FragHeader = 32;  // sizeof(mca_pml_ob1_frag_hdr_t)
constexpr std::size_t kMaxOpenRendezvous = 4096;

enum : std::uint8_t {
  kBtlSend = 1, kBtlPut = 2, kBtlGet = 3,
  kOb1Match = 0x41, kOb1Rndv, kOb1Rget, kOb1Ack, kOb1Nack, kOb1Frag, kOb1Get, kOb1Put, kOb1Fin,
};

bool openmpi_detect(const View& v) { return v.equals(8, std::string_view("OPAL-TCP-BTL\0", 13)); }

struct OpenRendezvous {
  std::size_t message;            // index into messages
  std::uint64_t remaining;        // message bytes still to come
  std::optional<std::uint64_t> request;  // the sender's request pointer, once seen
  std::optional<std::size_t> data;       // its data's message so far (index into messages)
};

DecodedStream decode_openmpi(const View& v, std::uint64_t end) {
  Out out;
  out.d.transport = Transport::openmpi;
  constexpr std::uint64_t kHandshake = 24;
  if (kHandshake > end) return out.stop("stream ends inside the openmpi handshake");
  out.emit(0, kHandshake, MessageKind::control, "mpi connect ack");
  std::deque<OpenRendezvous> open;
  bool per_fragment = false;  // a rendezvous whose length was not sampled
  std::string stopped;
  std::uint64_t o = kHandshake;
  auto& msgs = out.d.messages;
  while (o < end) {
    const auto tag = v.u8(o), type = v.u8(o + 1);
    const auto count = v.le(o + 2, 2), size = v.le(o + 4, 4);
    if (!tag || !type || !count || !size) {
      stopped = at("btl header not sampled", o);
      break;
    }
    std::uint64_t length = 0;
    if (*type == kBtlSend && *count == 0) {
      length = kBtlHeader + *size;
    } else if ((*type == kBtlPut || *type == kBtlGet) && *count == 1) {
      length = kBtlHeader + 16 * *count + (*type == kBtlPut ? *size : 0);
    } else {
      stopped = at("not a btl fragment header", o);
      break;
    }
    if (length > end - o) {
      stopped = at("stream ends inside the btl fragment", o);
      break;
    }
    const std::uint64_t frag_end = o + length;
    // The ob1 header repeats the tag as its type: a cheap check that this is ob1.
    const bool ob1 = *type == kBtlSend && *tag >= kOb1Match && *tag <= kOb1Fin && *size >= 2 && v.u8(o + kBtlHeader) == *tag;
    // A rendezvous's data is a message of its own, after its header: the sender
    // waits for the receiver's ACK or PUT request in between, which a replay must
    // wait for too. Fragments of it that follow each other are one message.
    auto continue_open = [&](std::size_t which, std::uint64_t payload) {
      if (open[which].data && msgs[*open[which].data].end == o) {
        DecodedMessage& m = msgs[*open[which].data];
        m.end = frag_end;
        m.bytes += length;
        ++m.parts;
      } else {
        open[which].data = msgs.size();
        msgs.push_back({o, frag_end, MessageKind::data, "mpi rendezvous data", length, 1});
      }
      open[which].remaining -= std::min(open[which].remaining, payload);
      if (open[which].remaining == 0) open.erase(open.begin() + static_cast<std::ptrdiff_t>(which));
    };
    if (ob1 && (*tag == kOb1Rndv || *tag == kOb1Rget)) {
      msgs.push_back({o, frag_end, MessageKind::data, *tag == kOb1Rndv ? "mpi rendezvous" : "mpi rget", length, 1});
      const auto total = v.le(o + kBtlHeader + 16, 8);  // hdr_msg_length
      const std::uint64_t eager = *size >= kOb1RndvHeader ? *size - kOb1RndvHeader : 0;
      if (*tag == kOb1Rget) {
        // Its data is fetched by the receiver's GET: not on this stream.
      } else if (!total) {
        per_fragment = true;
      } else if (*total > eager) {
        if (open.size() >= kMaxOpenRendezvous) {
          stopped = at("too many rendezvous messages open", o);
          msgs.pop_back();
          break;
        }
        open.push_back({msgs.size() - 1, *total - eager, v.le(o + kBtlHeader + 24, 8), std::nullopt});
      }
    } else if (ob1 && *tag == kOb1Frag) {
      const auto request = v.le(o + kBtlHeader + 16, 8);  // hdr_src_req
      const std::uint64_t payload = *size >= kOb1FragHeader ? *size - kOb1FragHeader : 0;
      std::optional<std::size_t> which;
      for (std::size_t i = 0; i < open.size() && !which; ++i) {
        if (request && open[i].request == request) which = i;
      }
      for (std::size_t i = 0; i < open.size() && !which; ++i) {
        if (!open[i].request) which = i;
      }
      if (which) {
        if (!open[*which].request) open[*which].request = request;
        continue_open(*which, payload);
      } else {
        per_fragment = true;
        msgs.push_back({o, frag_end, MessageKind::data, "mpi fragment", length, 1});
      }
    } else if (*type == kBtlPut && !open.empty()) {
      continue_open(0, *size);  // RDMA data of the oldest rendezvous, asked for by the receiver
    } else if (ob1 && *tag == kOb1Match) {
      msgs.push_back({o, frag_end, MessageKind::data, "mpi eager", length, 1});
    } else if (ob1) {
      static constexpr std::array<const char*, 9> kLabels = {"mpi match", "mpi rendezvous", "mpi rget", "mpi ack", "mpi nack",
                                                             "mpi fragment", "mpi get", "mpi put", "mpi fin"};
      msgs.push_back({o, frag_end, MessageKind::control, kLabels[*tag - kOb1Match], length, 1});
    } else {
      msgs.push_back({o, frag_end, MessageKind::data, "btl fragment", length, 1});
    }
    o = frag_end;
  }
  // decoded_until: where the walk stopped, moved back before any message still
  // open, and then to the longest run of messages (by begin) that ends before the
  // next one begins, so that it stays a message boundary.
  std::uint64_t until = o;
  for (const auto& r : open) until = std::min(until, msgs[r.message].begin);
  std::size_t keep = 0;
  std::uint64_t max_end = 0;
  for (std::size_t k = 0; k <= msgs.size(); ++k) {
    const std::uint64_t bound = k < msgs.size() ? std::min(until, msgs[k].begin) : until;
    if (max_end <= bound) keep = k;
    if (k < msgs.size()) max_end = std::max(max_end, msgs[k].end);
  }
  if (keep < msgs.size()) until = std::min(until, msgs[keep].begin);
  msgs.resize(keep);
  out.d.decoded_until = until;
  if (!open.empty()) stopped += std::string(stopped.empty() ? "" : "; ") + "rendezvous message not complete";
  if (per_fragment) out.stop("some mpi messages delimited per btl fragment (their ob1 header was not sampled)");
  if (!stopped.empty()) return out.stop(stopped);
  return out.done();
}

// --- tensorwire's data plane (core/frame.hpp) --------------------------------

DecodedStream decode_tensorwire(const View& v, std::uint64_t end) {
  Out out;
  out.d.transport = Transport::tensorwire;
  std::uint64_t o = 0;
  const auto magic = v.le(0, 4);
  if (magic == frame::kHelloMagic) {
    const auto token = v.le(6, 2);
    if (!token) return out.stop("tensorwire hello not sampled");
    const std::uint64_t hello = frame::kHelloFixedSize + *token;
    if (hello > end) return out.stop("stream ends inside the tensorwire hello");
    out.emit(0, hello, MessageKind::control, "tensorwire hello");
    o = hello;
  } else if (magic == frame::kAcceptMagic) {
    if (frame::kAcceptSize > end) return out.stop("stream ends inside the tensorwire accept");
    out.emit(0, frame::kAcceptSize, MessageKind::control, "tensorwire accept");
    o = frame::kAcceptSize;
  }
  while (o < end) {
    const auto m = v.le(o, 4), header = v.le(o + 6, 2), length = v.le(o + 16, 8);
    if (!m || !header || !length) return out.stop(at("tensorwire frame header not sampled", o));
    if (*m != frame::kMessageMagic || *header != frame::kHeaderSize || *length < frame::kHeaderSize) {
      return out.stop(at("not a tensorwire frame header", o));
    }
    if (*length > end - o) {
      out.emit(o, end, MessageKind::data, "tensorwire message");
      return out.stop(at("stream ends inside the tensorwire message", o));
    }
    out.emit(o, o + *length, MessageKind::data, "tensorwire message");
    o += *length;
  }
  return out.done();
}

bool tensorwire_detect(const View& v) {
  const auto magic = v.le(0, 4);
  if (magic == frame::kHelloMagic) {
    const auto token = v.le(6, 2);
    return v.le(4, 2) == frame::kVersion && token && *token <= frame::kMaxTokenSize;
  }
  if (magic == frame::kAcceptMagic) {
    const auto status = v.le(4, 4);
    return status && *status <= static_cast<std::uint32_t>(frame::AcceptStatus::duplicate);
  }
  return magic == frame::kMessageMagic && v.le(6, 2) == frame::kHeaderSize;
}

}  // namespace

DecodedStream decode_stream(const SparseBytes& sent, std::uint64_t stream_end, const SparseBytes* received) {
  const View v(sent);
  if (stream_end == 0) return {};
  if (!v.u8(0)) return {Transport::unknown, {}, 0, "the stream's first bytes were not sampled"};
  if (tensorwire_detect(v)) return decode_tensorwire(v, stream_end);
  if (openmpi_detect(v)) return decode_openmpi(v, stream_end);
  if (zmtp_detect(v)) return decode_zmtp(v, stream_end, received);
  if (const auto start = gloo_start(v, stream_end)) return decode_gloo(v, stream_end, *start);
  return {Transport::unknown, {}, 0, "no known framing"};
}

}  // namespace tw::framing

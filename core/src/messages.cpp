#include <algorithm>
#include <arpa/inet.h>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string_view>
#include <sys/socket.h>
#include <tuple>

#include "tensorwire/core/framing.hpp"
#include "tensorwire/core/trace.hpp"

namespace tw {

namespace {

std::string address(std::uint16_t family, const std::uint8_t* a, std::uint16_t port) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family == AF_INET) {
    ::inet_ntop(AF_INET, a, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port);
  }
  ::inet_ntop(AF_INET6, a, buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(port);
}

// Exit time of the receive call that returned stream byte `offset`, or -1.
Nanos receipt(const std::vector<const trace::Event*>& recvs, std::uint64_t offset) {
  auto it = std::upper_bound(recvs.begin(), recvs.end(), offset,
                             [](std::uint64_t o, const trace::Event* e) { return o < e->offset; });
  if (it == recvs.begin()) return -1;
  const trace::Event* e = *(it - 1);
  return offset < e->offset + static_cast<std::uint64_t>(e->result) ? e->exit_ns : -1;
}

// Messages get the iteration whose span holds their `ready` on the sending
// process, and the bucket being reduced then: collectives on a process group run
// in the order they were issued, so it is the earliest-ready bucket not yet
// reduced.
void attribute_to_spans(CaptureAnalysis& a, const std::vector<ProcessTrace>& traces) {
  a.spans = annotated_spans(traces);
  if (a.spans.empty()) return;
  std::vector<std::vector<std::size_t>> by_process(traces.size());  // span indices, by begin
  for (std::size_t i = 0; i < a.spans.size(); ++i) by_process[a.spans[i].process].push_back(i);
  constexpr std::size_t kLookBack = 4096;  // spans scanned back from a message
  for (Message& m : a.messages) {
    const Connection& c = a.connections[m.connection];
    const auto& idx = by_process[c.process];
    auto it = std::upper_bound(idx.begin(), idx.end(), m.ready, [&](Nanos t, std::size_t i) { return t < a.spans[i].begin; });
    for (std::size_t n = 0; it != idx.begin() && n < kLookBack; ++n) {
      const AnnotatedSpan& s = a.spans[*--it];
      const bool open = s.end < 0 || m.ready <= s.end;
      if (s.type == trace::MarkType::bucket && open && c.role == ConnectionRole::data) {
        m.bucket_span = static_cast<std::int64_t>(*it);  // scanning back: the earliest still open wins
      }
      if (s.type == trace::MarkType::iteration) {  // buckets do not outlive their iteration's start
        if (open) m.iteration = s.value;
        break;
      }
    }
  }
}

}  // namespace

bool continues(const trace::Event& prev, const trace::Event& next, Nanos gap) {
  if (static_cast<std::uint64_t>(prev.result) < prev.requested) return true;  // the rest of a partial write
  return static_cast<std::uint64_t>(prev.result) < kSmallCall && next.enter_ns - prev.exit_ns <= gap;
}

const char* origin_name(trace::ConnOrigin o) {
  switch (o) {
    case trace::ConnOrigin::connect:
      return "connect";
    case trace::ConnOrigin::accept:
      return "accept";
    case trace::ConnOrigin::unknown:
    case trace::ConnOrigin::in_use:
      break;
  }
  return "in use";
}

const char* role_name(ConnectionRole r) { return r == ConnectionRole::store ? "store" : "data"; }

const char* mark_type_name(trace::MarkType t) {
  switch (t) {
    case trace::MarkType::iteration: return "iteration";
    case trace::MarkType::forward: return "forward";
    case trace::MarkType::backward: return "backward";
    case trace::MarkType::optimizer: return "optimizer";
    case trace::MarkType::bucket: return "bucket";
    case trace::MarkType::span: return "span";
  }
  return "span";
}

// Without a map of open spans: a job may leave a million marks unpaired, each a
// node of a map (160 bytes, and its name again) where here it costs 12 bytes
// beside its span. Marks are put in time order, then in order of their pairing
// key (type, thread or bucket index, name) keeping time order, and each key's
// ends close its latest open begins.
std::vector<AnnotatedSpan> annotated_spans(const std::vector<ProcessTrace>& traces) {
  std::vector<AnnotatedSpan> out;
  constexpr std::uint32_t kNone = UINT32_MAX;
  for (std::size_t p = 0; p < traces.size(); ++p) {
    const std::vector<trace::MarkEvent>& marks = traces[p].marks;
    // A trace file is at most 64 GiB (kMaxDataFile), 2^30 events: indices fit 32 bits.
    if (marks.size() >= kNone) throw std::length_error("more annotation marks in one process than 2^32 - 1");
    std::vector<std::uint32_t> order(marks.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return marks[a].at_ns < marks[b].at_ns; });
    const std::size_t first = out.size();
    // span_of[k]: the span the k-th mark in time order opened (begins and instants).
    std::vector<std::uint32_t> span_of(order.size(), kNone);
    for (std::size_t k = 0; k < order.size(); ++k) {
      const trace::MarkEvent& m = marks[order[k]];
      if (m.phase == 'E') continue;
      span_of[k] = static_cast<std::uint32_t>(out.size() - first);
      out.push_back({p, m.type, m.name, m.value, m.aux, m.at_ns, m.phase == 'I' ? m.at_ns : Nanos{-1}});
    }
    const auto key = [&](std::uint32_t k) {
      const trace::MarkEvent& m = marks[order[k]];
      const bool bucket = m.type == trace::MarkType::bucket;
      return std::make_tuple(static_cast<int>(m.type), bucket ? m.aux : m.tid,
                             bucket ? std::string_view() : std::string_view(m.name, ::strnlen(m.name, sizeof m.name)));
    };
    std::vector<std::uint32_t> by_key(order.size());
    for (std::uint32_t k = 0; k < by_key.size(); ++k) by_key[k] = k;
    std::stable_sort(by_key.begin(), by_key.end(), [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
    std::vector<std::uint32_t> open;  // spans of the key at hand begun and not yet ended, latest last
    for (std::size_t i = 0; i < by_key.size(); ++i) {
      if (i == 0 || key(by_key[i]) != key(by_key[i - 1])) open.clear();
      const std::uint32_t k = by_key[i];
      const trace::MarkEvent& m = marks[order[k]];
      if (m.phase == 'E') {
        if (open.empty()) continue;  // an end without its begin
        out[first + open.back()].end = m.at_ns;
        open.pop_back();
      } else if (m.phase != 'I') {
        open.push_back(span_of[k]);
      }
    }
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                     [](const auto& a, const auto& b) { return a.begin < b.begin; });
  }
  return out;
}

CaptureAnalysis analyse_capture(const std::vector<ProcessTrace>& traces, Nanos gap, const wire::WireIndex* wire) {
  CaptureAnalysis a;
  std::map<std::pair<std::size_t, std::uint32_t>, std::size_t> index;  // (process, conn id) -> connection
  // The sent direction on the wire, per connection: an index into `sessions`.
  // Connections that name the same session (a reused address pair, or a trace
  // that lists one connection many times) share it: building one costs a pass
  // over its segments.
  std::vector<wire::WireIndex::Stream> sessions;
  std::map<std::pair<wire::FlowKey, Nanos>, std::size_t> session_of;  // (key, opened) -> sessions
  const auto stream_of = [&](const trace::ConnEvent& c) -> std::optional<std::size_t> {
    if (!wire || c.how == trace::ConnOrigin::in_use) return std::nullopt;
    const wire::FlowKey key = wire::flow_key(c.family, c.local, c.local_port, c.remote, c.remote_port);
    const auto start = wire->stream_start(key, c.at_ns);
    if (!start) return std::nullopt;
    const auto [it, added] = session_of.try_emplace({key, start->opened}, sessions.size());
    if (added) sessions.push_back(wire->stream(key, c.at_ns).value());  // the session stream_start found
    return it->second;
  };
  std::vector<std::optional<std::size_t>> stream_index;
  for (std::size_t p = 0; p < traces.size(); ++p) {
    for (const auto& c : traces[p].conns) {
      if (index.count({p, c.conn})) continue;
      stream_index.push_back(stream_of(c));
      Connection x;
      x.process = p;
      x.id = c.conn;
      x.local.address = address(c.family, c.local, c.local_port);
      x.remote.address = address(c.family, c.remote, c.remote_port);
      // The shim resolves "unknown" before it writes; a file that holds it anyway
      // (or another value) is read as found in use.
      x.how = c.how == trace::ConnOrigin::connect || c.how == trace::ConnOrigin::accept ? c.how : trace::ConnOrigin::in_use;
      // PyTorch's rendezvous (TCPStore) listens on MASTER_PORT: control, not tensors.
      const auto mp = traces[p].env.find("MASTER_PORT");
      const bool store = mp != traces[p].env.end() &&
                         (mp->second == std::to_string(c.local_port) || mp->second == std::to_string(c.remote_port));
      x.role = store ? ConnectionRole::store : ConnectionRole::data;
      if (const auto k = stream_index.back()) {
        const wire::WireIndex::Stream* st = &sessions[*k];
        x.on_wire = true;
        x.wire_bytes = st->bytes_seen();
        x.retransmits = st->retransmits();
        x.retransmitted_bytes = st->retransmitted_bytes();
      }
      index[{p, c.conn}] = a.connections.size();
      a.connections.push_back(x);
    }
  }
  // Pair the two ends: same host pair, addresses swapped (the last such
  // connection, if an address pair was reused). By lookup: a capture may hold
  // a hundred thousand connections.
  {
    std::map<std::pair<std::string_view, std::string_view>, std::vector<std::size_t>> by_ends;
    for (std::size_t k = 0; k < a.connections.size(); ++k) {
      by_ends[{a.connections[k].local.address, a.connections[k].remote.address}].push_back(k);
    }
    for (std::size_t i = 0; i < a.connections.size(); ++i) {
      const auto it = by_ends.find({a.connections[i].remote.address, a.connections[i].local.address});
      if (it == by_ends.end()) continue;
      for (auto k = it->second.rbegin(); k != it->second.rend(); ++k) {
        if (*k != i) {
          a.connections[i].peer = *k;
          break;
        }
      }
    }
  }
  for (std::size_t p = 0; p < traces.size(); ++p) {
    for (const auto& t : traces[p].tcp_info) {
      if (const auto it = index.find({p, t.conn}); it != index.end()) {
        auto& k = a.connections[it->second].kernel_retransmits;
        k = std::max(k, t.total_retrans);
      }
    }
  }
  // Per connection: send and receive calls in stream order.
  std::vector<std::vector<const trace::Event*>> sends(a.connections.size()), recvs(a.connections.size());
  for (std::size_t p = 0; p < traces.size(); ++p) {
    for (const auto& e : traces[p].io) {
      const auto it = index.find({p, e.conn});
      if (it == index.end()) continue;
      Connection& c = a.connections[it->second];
      if (e.kind == trace::Kind::send) {
        ++c.send_calls;
        if (e.result > 0) {
          c.bytes_sent += static_cast<std::uint64_t>(e.result);
          sends[it->second].push_back(&e);
        } else if (e.result < 0) {
          ++c.failed_calls;
        }
      } else if (e.kind == trace::Kind::recv && !(e.flags & trace::kFlagPeek)) {
        ++c.recv_calls;
        if (e.result > 0) {
          c.bytes_received += static_cast<std::uint64_t>(e.result);
          recvs[it->second].push_back(&e);
        } else if (e.result < 0) {
          ++c.failed_calls;
        }
      }
    }
  }
  for (auto& v : sends) std::sort(v.begin(), v.end(), [](auto* x, auto* y) { return x->offset < y->offset; });
  for (auto& v : recvs) std::sort(v.begin(), v.end(), [](auto* x, auto* y) { return x->offset < y->offset; });
  a.call_offsets.resize(a.connections.size());
  for (std::size_t c = 0; c < sends.size(); ++c) {
    a.call_offsets[c].reserve(sends[c].size());
    for (const trace::Event* e : sends[c]) a.call_offsets[c].push_back(e->offset);
  }
  // The transport's framing where the capture sampled it: both directions of a
  // connection (ZeroMQ picks its encoder from the peer's greeting).
  // Each process's samples and send events are split by connection once, so that
  // a process with many connections is not scanned once per connection.
  std::vector<std::vector<trace::SampleEvent>> samples_of(a.connections.size());
  for (std::size_t p = 0; p < traces.size(); ++p) {
    for (const trace::SampleEvent& e : traces[p].samples) {
      if (const auto it = index.find({p, e.conn}); it != index.end()) samples_of[it->second].push_back(e);
    }
  }
  std::vector<framing::SentStream> sampled(a.connections.size());
  std::vector<trace::Event> calls;
  for (std::size_t c = 0; c < a.connections.size(); ++c) {
    if (samples_of[c].empty() || sends[c].empty()) continue;
    calls.clear();
    for (const trace::Event* e : sends[c]) calls.push_back(*e);
    sampled[c] = framing::sent_stream(calls, samples_of[c], a.connections[c].id);
    samples_of[c] = {};
  }
  for (std::size_t c = 0; c < a.connections.size(); ++c) {
    const auto& s = sends[c];
    // Messages [begin, end) decoded from the framing, then the timing rule.
    std::vector<framing::DecodedMessage> decoded;
    if (sampled[c].bytes.bytes() > 0) {
      const auto peer = a.connections[c].peer;
      framing::DecodedStream d = framing::decode_stream(sampled[c].bytes, sampled[c].end,
                                                        peer && sampled[*peer].bytes.bytes() > 0 ? &sampled[*peer].bytes : nullptr);
      if (d.transport != framing::Transport::unknown) {
        a.connections[c].transport = framing::transport_name(d.transport);
        a.connections[c].decoded_until = d.decoded_until;
        a.connections[c].decode_note = d.note;
        decoded = std::move(d.messages);
      }
    }
    // The wire tap's times and the receiver's reads for a message.
    const auto messages_from_calls = [&](Message& m) {
      if (const auto k = stream_index[c]) {
        const wire::WireTimes w = sessions[*k].times(m.begin, m.end);
        m.wire_first = w.wire_first;
        m.wire_last = w.wire_last;
        m.acked = w.acked;
        m.retransmits = w.retransmits;
      }
      if (const auto peer = a.connections[c].peer) {
        m.recv_first = receipt(recvs[*peer], m.begin);
        m.recv_last = receipt(recvs[*peer], m.end - 1);
      }
      a.messages.push_back(m);
    };
    const auto call_at = [&s](std::uint64_t offset) {  // the call that moved stream byte `offset`
      auto it = std::upper_bound(s.begin(), s.end(), offset, [](std::uint64_t o, const trace::Event* e) { return o < e->offset; });
      return it == s.begin() ? std::size_t{0} : static_cast<std::size_t>(it - s.begin() - 1);
    };
    std::size_t i = 0;
    for (const framing::DecodedMessage& d : decoded) {
      if (s.empty() || d.end <= d.begin) continue;
      Message m;
      m.connection = c;
      m.begin = d.begin;
      m.end = d.end;
      m.control = d.kind == framing::MessageKind::control;
      const std::size_t first = call_at(d.begin), last = call_at(d.end - 1);
      m.ready = s[first]->enter_ns;
      m.sent_app = s[last]->exit_ns;
      m.calls = static_cast<std::uint32_t>(last - first + 1);
      messages_from_calls(m);
      i = last + 1;
    }
    // A call the decoded part ends inside of continues past it: the timing rule
    // starts at the first call that begins at or after the decoded end.
    if (!decoded.empty()) {
      const std::uint64_t until = decoded.back().end;
      while (i < s.size() && s[i]->offset < until) ++i;
    }
    while (i < s.size()) {
      Message m;
      m.connection = c;
      m.begin = s[i]->offset;
      m.ready = s[i]->enter_ns;
      std::size_t k = i;
      while (k + 1 < s.size() && continues(*s[k], *s[k + 1], gap)) ++k;
      m.end = s[k]->offset + static_cast<std::uint64_t>(s[k]->result);
      m.sent_app = s[k]->exit_ns;
      m.calls = static_cast<std::uint32_t>(k - i + 1);
      messages_from_calls(m);
      i = k + 1;
    }
  }
  attribute_to_spans(a, traces);
  return a;
}

}  // namespace tw

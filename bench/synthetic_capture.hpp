// A synthetic capture for the benchmarks: a Gloo ring of R ranks written as a
// capture directory, as a real capture holds it (trace files with send and
// receive events and the shim's samples of each call).
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/trace.hpp"

namespace tw::bench {

namespace fs = std::filesystem;
using tw::Nanos;

struct Writer {
  std::vector<unsigned char> bytes;
  template <typename T>
  void put(const T& e) {
    const auto* p = reinterpret_cast<const unsigned char*>(&e);
    bytes.insert(bytes.end(), p, p + sizeof e);
  }
};

inline tw::trace::ConnEvent conn(std::uint32_t id, std::uint16_t lport, std::uint16_t rport) {
  tw::trace::ConnEvent c{};
  c.kind = tw::trace::Kind::conn;
  c.family = AF_INET;
  c.conn = id;
  c.how = tw::trace::ConnOrigin::connect;
  const unsigned char lo[4] = {127, 0, 0, 1};
  std::memcpy(c.local, lo, 4);
  std::memcpy(c.remote, lo, 4);
  c.local_port = lport;
  c.remote_port = rport;
  return c;
}

// A Gloo op's call: its send event, its sample (the preamble, and the payload's
// last bytes), and the peer's receive event.
inline void op(Writer& from, Writer& to, std::uint32_t conn_from, std::uint32_t conn_to, std::uint64_t& offset, Nanos ready,
        std::uint64_t opcode, std::uint64_t length) {
  const bool data = opcode <= 1;
  const std::uint64_t total = 48 + (data ? length : 0);
  tw::trace::Event e{};
  e.kind = tw::trace::Kind::send;
  e.call = tw::trace::Call::writev;
  e.conn = conn_from;
  e.tid = 1;
  e.enter_ns = ready;
  e.exit_ns = ready + 8000;
  e.result = static_cast<std::int64_t>(total);
  e.offset = offset;
  e.requested = total;
  from.put(e);
  tw::trace::SampleEvent s{};
  s.kind = tw::trace::Kind::sample;
  s.conn = conn_from;
  s.offset = offset;
  s.head_len = 32;
  const std::uint64_t pre[4] = {total, opcode, 0, 0};
  std::memcpy(s.head, pre, 32);
  s.tail_len = static_cast<std::uint8_t>(std::min<std::uint64_t>(16, total - 32));
  const std::uint64_t tail_start = total - s.tail_len;  // within the preamble: its own bytes
  const std::uint64_t preamble[6] = {total, opcode, 0, 0, length, 0};
  for (std::uint8_t i = 0; i < s.tail_len; ++i) {
    const std::uint64_t at = tail_start + i;
    s.tail[i] = at < 48 ? reinterpret_cast<const unsigned char*>(preamble)[at] : 0x3f;
  }
  from.put(s);
  tw::trace::Event r = e;
  r.kind = tw::trace::Kind::recv;
  r.call = tw::trace::Call::read;
  r.conn = conn_to;
  r.enter_ns = ready + 20000;
  r.exit_ns = ready + 30000;
  to.put(r);
  offset += total;
}

// A ring of `ranks` with `per` data ops per neighbour and iteration, each after
// its notification from the receiver: 2 * per * ranks messages per iteration.
inline std::size_t write_capture(const std::string& dir, std::size_t messages, std::uint32_t ranks) {
  fs::create_directories(dir);
  const std::size_t per = 100;
  const std::size_t iterations = std::max<std::size_t>(4, messages / (2 * per * ranks));
  std::vector<Writer> w(ranks);
  // Connection r joins rank r (port 30000 + r, id 1) and rank r+1 (port 31000 + r, id 2).
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const std::uint32_t next = (r + 1) % ranks;
    w[r].put(conn(1, static_cast<std::uint16_t>(30000 + r), static_cast<std::uint16_t>(31000 + r)));
    w[next].put(conn(2, static_cast<std::uint16_t>(31000 + r), static_cast<std::uint16_t>(30000 + r)));
  }
  std::vector<std::uint64_t> sent_next(ranks, 0), sent_prev(ranks, 0);  // per rank: bytes on conn 1 / conn 2
  std::size_t written = 0;
  for (std::size_t k = 0; k < iterations; ++k) {
    const Nanos start = static_cast<Nanos>(k) * 20'000'000;
    for (std::size_t j = 0; j < per; ++j) {
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const std::uint32_t next = (r + 1) % ranks;
        const Nanos t = start + 5'000'000 + static_cast<Nanos>(j) * 100'000 + r * 7'000;
        op(w[next], w[r], 2, 1, sent_prev[next], t - 15'000, 3, 65536);  // NOTIFY_RECV_READY
        op(w[r], w[next], 1, 2, sent_next[r], t, 1, 65536);              // SEND_UNBOUND_BUFFER
        written += 2;
      }
    }
  }
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const int pid = 1000 + static_cast<int>(r);
    std::ofstream json(tw::capture_dir::description_file(dir, pid));
    json << "{\"pid\": " << pid << ", \"ppid\": 1, \"host\": \"bench\", \"final\": true, \"cmdline\": [\"train.py\"],"
         << " \"env\": {\"RANK\": \"" << r << "\"}, \"events_written\": " << w[r].bytes.size() / 64 << "}\n";
    std::ofstream twt(tw::capture_dir::events_file(dir, pid), std::ios::binary);
    const auto h = tw::binary_file::encode_header(tw::trace::kMagic, tw::trace::kVersion, sizeof(tw::trace::Event));
    twt.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size()));
    twt.write(reinterpret_cast<const char*>(w[r].bytes.data()), static_cast<std::streamsize>(w[r].bytes.size()));
  }
  return written;
}

}  // namespace tw::bench

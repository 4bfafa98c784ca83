// libFuzzer target for the framing decoders: whatever bytes a connection carried
// and however its send calls split them, decode_stream never crashes, never
// reads out of bounds, and its answer tiles the decoded range. The first input
// byte chooses the call sizes, the second how much longer than the sampled bytes
// the stream claims to be; the rest is the stream, sampled as the shim samples.
// A first byte of 0xFF instead checks SparseBytes against a plain model.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "tensorwire/core/framing.hpp"

namespace {

// SparseBytes against a byte-by-byte model: records of (8-byte offset, length,
// bytes) in any order and overlap, then every byte read back one way and the other.
void sparse_bytes(const std::uint8_t* data, std::size_t size) {
  tw::framing::SparseBytes s;
  std::map<std::uint64_t, std::uint8_t> model;
  std::vector<std::uint64_t> offsets;
  for (std::size_t at = 0; at + 9 <= size;) {
    std::uint64_t offset = 0;
    std::memcpy(&offset, data + at, 8);
    if (data[at] & 1) offset = std::numeric_limits<std::uint64_t>::max() - data[at + 1];  // the top of the range
    const std::size_t n = std::min<std::size_t>(data[at + 8] % 40, size - at - 9);
    const std::uint8_t* bytes = data + at + 9;
    s.add(offset, bytes, n);
    const std::uint64_t room = std::numeric_limits<std::uint64_t>::max() - offset;  // offsets end below 2^64 - 1
    for (std::size_t i = 0; i < n && i < room; ++i) model.emplace(offset + i, bytes[i]);
    offsets.push_back(offset);
    at += 9 + n;
  }
  if (s.bytes() != model.size()) std::abort();
  for (const std::uint64_t o : offsets) {
    for (std::size_t n = 1; n <= 48; n += 7) {
      std::uint8_t out[48];
      bool all = n <= std::numeric_limits<std::uint64_t>::max() - o;
      for (std::size_t i = 0; i < n && all; ++i) all = model.count(o + i) != 0;
      if (s.read_into(o, std::span<std::uint8_t>(out, n)) != all) std::abort();
      for (std::size_t i = 0; i < n && all; ++i) {
        if (out[i] != model[o + i]) std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  if (data[0] == 0xff) {
    sparse_bytes(data + 1, size - 1);
    return 0;
  }
  const std::size_t chunk = 1 + data[0] % 96;
  const std::uint64_t extra = data[1] % 4 == 0 ? std::uint64_t{data[1]} << 12 : 0;
  const std::uint8_t* bytes = data + 2;
  const std::size_t n = size - 2;
  tw::framing::SparseBytes sent;
  for (std::size_t at = 0; at < n; at += chunk) {
    const std::size_t len = std::min(chunk, n - at);
    tw::trace::SampleEvent e{};
    e.kind = tw::trace::Kind::sample;
    e.offset = at;
    e.head_len = static_cast<std::uint8_t>(std::min(len, tw::trace::kSampleHead));
    e.tail_len = static_cast<std::uint8_t>(std::min(len - e.head_len, tw::trace::kSampleTail));
    std::memcpy(e.head, bytes + at, e.head_len);
    std::memcpy(e.tail, bytes + at + len - e.tail_len, e.tail_len);
    if (!sent.add_sample(e, len)) std::abort();
  }
  const std::uint64_t end = n + extra;
  const tw::framing::DecodedStream d = tw::framing::decode_stream(sent, end, &sent);
  if (d.decoded_until > end) std::abort();
  std::uint64_t covered = 0, last_begin = 0;
  for (const auto& m : d.messages) {
    if (m.begin >= m.end || m.begin < last_begin || m.end > d.decoded_until || m.bytes > m.end - m.begin) std::abort();
    covered += m.bytes;
    last_begin = m.begin;
  }
  if (!d.messages.empty() && covered != d.decoded_until) std::abort();
  return 0;
}

// libFuzzer target for the framing decoders: whatever bytes a connection carried
// and however its send calls split them, decode_stream never crashes, never
// reads out of bounds, and its answer tiles the decoded range. The first input
// byte chooses the call sizes, the second how much longer than the sampled bytes
// the stream claims to be; the rest is the stream, sampled as the shim samples.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tensorwire/core/framing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
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

// libFuzzer target for the data-plane decoders: whatever bytes a peer sends, the
// frame decoder and the hello decoder never crash, never read out of bounds, and
// account for every byte; a stream is split at input-chosen points.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tensorwire/core/frame.hpp"

namespace {

struct Sink : tw::frame::Decoder::Callbacks {
  std::uint64_t begun = 0, completed = 0;
  std::string validate(const tw::frame::Header& h) override {
    return h.op < 16 && h.length <= (1U << 20) ? std::string() : std::string("out of profile");
  }
  void begin(const tw::frame::Header&) override { ++begun; }
  void complete(const tw::frame::Header&) override {
    ++completed;
    if (completed > begun) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size >= tw::frame::kHelloFixedSize) {
    std::string error;
    (void)tw::frame::decode_hello_prefix(
        std::span<const std::byte, tw::frame::kHelloFixedSize>(reinterpret_cast<const std::byte*>(data), tw::frame::kHelloFixedSize),
        &error);
  }
  if (size < 1) return 0;
  const std::size_t chunk = 1 + data[0] % 64;
  const auto* bytes = reinterpret_cast<const std::byte*>(data + 1);
  const std::size_t n = size - 1;
  tw::frame::Decoder decoder;
  Sink sink;
  for (std::size_t pos = 0; pos < n; pos += chunk) {
    if (decoder.feed(std::span<const std::byte>(bytes + pos, std::min(chunk, n - pos)), sink)) return 0;
  }
  if (decoder.bytes() != n) std::abort();
  return 0;
}

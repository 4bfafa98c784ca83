#include "tensorwire/core/frame.hpp"

#include <cstring>
#include <stdexcept>

namespace tw::frame {
namespace {

template <typename T>
void put(std::byte* out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* in) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(v);
}

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

template <typename T>
std::uint64_t mix(std::uint64_t h, T v) {
  const auto x = static_cast<std::uint64_t>(v);
  return fnv1a(h, &x, sizeof x);
}

}  // namespace

void encode_header(const Header& h, std::span<std::byte, kHeaderSize> out) {
  put<std::uint32_t>(out.data(), kMessageMagic);
  put<std::uint16_t>(out.data() + 4, 0);  // flags
  put<std::uint16_t>(out.data() + 6, static_cast<std::uint16_t>(kHeaderSize));
  put<std::uint32_t>(out.data() + 8, h.iteration);
  put<std::uint32_t>(out.data() + 12, h.op);
  put<std::uint64_t>(out.data() + 16, h.length);
}

std::string encode_hello(const Hello& h) {
  if (h.token.size() > kMaxTokenSize) throw std::invalid_argument("the run token is longer than 256 bytes");
  std::string out(kHelloFixedSize + h.token.size(), '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  put<std::uint32_t>(p, kHelloMagic);
  put<std::uint16_t>(p + 4, kVersion);
  put<std::uint16_t>(p + 6, static_cast<std::uint16_t>(h.token.size()));
  put<std::uint32_t>(p + 8, h.flow);
  put<std::uint32_t>(p + 12, h.src);
  put<std::uint64_t>(p + 16, h.profile_digest);
  std::memcpy(out.data() + kHelloFixedSize, h.token.data(), h.token.size());
  return out;
}

std::optional<HelloPrefix> decode_hello_prefix(std::span<const std::byte, kHelloFixedSize> in, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<HelloPrefix> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (get<std::uint32_t>(in.data()) != kHelloMagic) return fail("not a tensorwire data connection (bad hello magic)");
  if (get<std::uint16_t>(in.data() + 4) != kVersion) return fail("unsupported data-plane version");
  HelloPrefix out;
  out.token_size = get<std::uint16_t>(in.data() + 6);
  if (out.token_size > kMaxTokenSize) return fail("hello token longer than 256 bytes");
  out.hello.flow = get<std::uint32_t>(in.data() + 8);
  out.hello.src = get<std::uint32_t>(in.data() + 12);
  out.hello.profile_digest = get<std::uint64_t>(in.data() + 16);
  return out;
}

const char* accept_status_text(AcceptStatus s) {
  switch (s) {
    case AcceptStatus::ok: return "accepted";
    case AcceptStatus::bad_token: return "wrong run token";
    case AcceptStatus::bad_flow: return "no such flow into this rank";
    case AcceptStatus::bad_profile: return "the peer replays a different profile";
    case AcceptStatus::duplicate: return "flow already connected";
  }
  return "unknown status";
}

std::array<std::byte, kAcceptSize> encode_accept(AcceptStatus s) {
  std::array<std::byte, kAcceptSize> out{};
  put<std::uint32_t>(out.data(), kAcceptMagic);
  put<std::uint32_t>(out.data() + 4, static_cast<std::uint32_t>(s));
  return out;
}

std::optional<AcceptStatus> decode_accept(std::span<const std::byte, kAcceptSize> in) {
  if (get<std::uint32_t>(in.data()) != kAcceptMagic) return std::nullopt;
  const auto s = get<std::uint32_t>(in.data() + 4);
  if (s > static_cast<std::uint32_t>(AcceptStatus::duplicate)) return std::nullopt;
  return static_cast<AcceptStatus>(s);
}

std::uint64_t profile_digest(const Profile& p) {
  std::uint64_t h = 14695981039346656037ULL;
  h = mix(h, p.ranks.size());
  for (const Flow& f : p.flows) {
    h = fnv1a(h, f.id.data(), f.id.size());
    h = mix(h, f.src);
    h = mix(h, f.dst);
  }
  for (const Op& op : p.ops) {
    h = fnv1a(h, op.id.data(), op.id.size());
    h = mix(h, static_cast<int>(op.type));
    h = mix(h, op.rank);
    h = mix(h, op.flow);
    h = mix(h, op.bytes);
  }
  return h;
}

std::optional<std::string> Decoder::feed(std::span<const std::byte> in, Callbacks& cb) {
  std::size_t pos = 0;
  while (pos < in.size()) {
    if (remaining_ == 0) {
      const std::size_t take = std::min(kHeaderSize - have_, in.size() - pos);
      std::memcpy(header_bytes_.data() + have_, in.data() + pos, take);
      have_ += take;
      pos += take;
      total_ += take;
      if (have_ < kHeaderSize) return std::nullopt;
      have_ = 0;
      const std::byte* b = header_bytes_.data();
      if (get<std::uint32_t>(b) != kMessageMagic) return std::string("bad frame magic");
      if (get<std::uint16_t>(b + 6) != kHeaderSize) return std::string("bad frame header size");
      current_.iteration = get<std::uint32_t>(b + 8);
      current_.op = get<std::uint32_t>(b + 12);
      current_.length = get<std::uint64_t>(b + 16);
      if (current_.length < kHeaderSize) return std::string("frame length shorter than its header");
      std::string why = cb.validate(current_);
      if (!why.empty()) return why;
      cb.begin(current_);
      remaining_ = current_.length - kHeaderSize;
      if (remaining_ == 0) cb.complete(current_);
      continue;
    }
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size() - pos));
    pos += take;
    total_ += take;
    remaining_ -= take;
    if (remaining_ == 0) cb.complete(current_);
  }
  return std::nullopt;
}

}  // namespace tw::frame

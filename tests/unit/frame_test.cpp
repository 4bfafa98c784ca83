#include "tensorwire/core/frame.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tensorwire/core/profile_io.hpp"

namespace tw::frame {
namespace {

struct Collect : Decoder::Callbacks {
  std::vector<Header> begun, completed;
  std::uint64_t max_length = 1 << 30;
  std::string validate(const Header& h) override { return h.length > max_length ? "too long" : ""; }
  void begin(const Header& h) override { begun.push_back(h); }
  void complete(const Header& h) override { completed.push_back(h); }
};

std::vector<std::byte> message(std::uint32_t it, std::uint32_t op, std::uint64_t length) {
  std::vector<std::byte> out(length, std::byte{0x5a});
  encode_header({it, op, length}, std::span<std::byte, kHeaderSize>(out.data(), kHeaderSize));
  return out;
}

TEST(Frame, WireBytesMatchTheProfileButNeverUndercutTheHeader) {
  EXPECT_EQ(wire_bytes(1 << 20), 1U << 20);
  EXPECT_EQ(wire_bytes(24), 24U);
  EXPECT_EQ(wire_bytes(1), 24U);
}

TEST(Frame, DecodesMessagesSplitAtEveryByteBoundary) {
  std::vector<std::byte> stream;
  for (auto [it, op, len] : {std::tuple{0U, 3U, 24ULL}, std::tuple{0U, 4U, 1000ULL}, std::tuple{1U, 3U, 24ULL},
                             std::tuple{7U, 9U, 70000ULL}}) {
    const auto m = message(it, op, len);
    stream.insert(stream.end(), m.begin(), m.end());
  }
  for (std::size_t chunk : {std::size_t{1}, std::size_t{5}, std::size_t{23}, std::size_t{24}, std::size_t{4096}, stream.size()}) {
    SCOPED_TRACE(chunk);
    Decoder d;
    Collect c;
    for (std::size_t pos = 0; pos < stream.size(); pos += chunk) {
      const std::size_t n = std::min(chunk, stream.size() - pos);
      ASSERT_FALSE(d.feed(std::span<const std::byte>(stream.data() + pos, n), c).has_value());
    }
    ASSERT_EQ(c.completed.size(), 4U);
    EXPECT_EQ(c.begun.size(), 4U);
    EXPECT_EQ(c.completed[1].op, 4U);
    EXPECT_EQ(c.completed[1].length, 1000U);
    EXPECT_EQ(c.completed[3].iteration, 7U);
    EXPECT_TRUE(d.idle());
    EXPECT_EQ(d.bytes(), stream.size());
  }
}

TEST(Frame, CompletesExactlyOnTheLastByte) {
  const auto m = message(2, 5, 100);
  Decoder d;
  Collect c;
  ASSERT_FALSE(d.feed(std::span<const std::byte>(m.data(), 99), c).has_value());
  EXPECT_EQ(c.begun.size(), 1U);
  EXPECT_TRUE(c.completed.empty());
  EXPECT_FALSE(d.idle());
  ASSERT_FALSE(d.feed(std::span<const std::byte>(m.data() + 99, 1), c).has_value());
  EXPECT_EQ(c.completed.size(), 1U);
}

TEST(Frame, RejectsBadMagicShortLengthsAndInvalidHeaders) {
  Decoder d;
  Collect c;
  std::vector<std::byte> junk(24, std::byte{1});
  EXPECT_EQ(d.feed(junk, c).value_or(""), "bad frame magic");
  auto short_len = message(0, 0, 24);
  short_len[16] = std::byte{3};  // length 3 < header
  Decoder d2;
  EXPECT_EQ(d2.feed(short_len, c).value_or(""), "frame length shorter than its header");
  Decoder d3;
  c.max_length = 100;
  EXPECT_EQ(d3.feed(message(0, 0, 1000), c).value_or(""), "too long");
}

TEST(Frame, HelloAndAcceptRoundTrip) {
  const std::string wire = encode_hello({7, 2, 0x1234567890abcdefULL, "token-xyz"});
  ASSERT_EQ(wire.size(), kHelloFixedSize + 9);
  std::string error;
  const auto prefix = decode_hello_prefix(
      std::span<const std::byte, kHelloFixedSize>(reinterpret_cast<const std::byte*>(wire.data()), kHelloFixedSize), &error);
  ASSERT_TRUE(prefix.has_value()) << error;
  EXPECT_EQ(prefix->hello.flow, 7U);
  EXPECT_EQ(prefix->hello.src, 2U);
  EXPECT_EQ(prefix->hello.profile_digest, 0x1234567890abcdefULL);
  EXPECT_EQ(prefix->token_size, 9U);
  const auto acc = encode_accept(AcceptStatus::bad_token);
  EXPECT_EQ(decode_accept(acc), AcceptStatus::bad_token);
  std::array<std::byte, kAcceptSize> garbage{};
  EXPECT_FALSE(decode_accept(garbage).has_value());
  std::array<std::byte, kHelloFixedSize> http{};
  std::memcpy(http.data(), "GET / HTTP/1.1\r\nHost: x\r\n", kHelloFixedSize);
  EXPECT_FALSE(decode_hello_prefix(http, &error).has_value());
  EXPECT_NE(error.find("hello magic"), std::string::npos);
  EXPECT_THROW(encode_hello({0, 0, 0, std::string(300, 'x')}), std::invalid_argument);
}

TEST(Frame, ProfileDigestSeesSizesNotMetadata) {
  ProfileLoad a = load_profile_file(std::string(TW_SOURCE_DIR) + "/traffic_profiles/mlp-ring-2.yaml");
  ASSERT_TRUE(a.ok());
  Profile p = *std::move(a.profile);
  const std::uint64_t d = profile_digest(p);
  p.metadata.description = "changed";
  p.iterations = 3;
  EXPECT_EQ(profile_digest(p), d);
  for (Op& op : p.ops) {
    if (op.type == OpType::send) {
      op.bytes += 1;
      break;
    }
  }
  EXPECT_NE(profile_digest(p), d);
}

}  // namespace
}  // namespace tw::frame

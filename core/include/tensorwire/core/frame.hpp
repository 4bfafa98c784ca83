// The data-plane wire format: what agents write on each flow's TCP connection.
//
// A connection opens with a Hello from the sending side (which flow it carries,
// the run's token, a digest of the profile) and a one-word Accept from the
// receiving side. Then it carries messages: a 24-byte header (magic, iteration,
// op, total length) followed by payload, so the bytes on the wire for a message
// are exactly its size in the profile (a message smaller than the header is sent
// as the header alone). All integers are little-endian. docs/protocol.md has the
// byte layout. Pure code: no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tensorwire/core/profile.hpp"

namespace tw::frame {

inline constexpr std::uint32_t kMessageMagic = 0x31525754;  // "TWR1"
inline constexpr std::uint32_t kHelloMagic = 0x31485754;  // "TWH1"
inline constexpr std::uint32_t kAcceptMagic = 0x31415754;  // "TWA1"
inline constexpr std::size_t kHeaderSize = 24;
inline constexpr std::size_t kHelloFixedSize = 24;
inline constexpr std::size_t kAcceptSize = 8;
inline constexpr std::size_t kMaxTokenSize = 256;
inline constexpr std::uint16_t kVersion = 1;

struct Header {
  std::uint32_t iteration = 0;
  std::uint32_t op = 0;
  std::uint64_t length = 0;  // bytes on the wire for the whole message, header included
};

// Bytes on the wire for a message of `bytes` in the profile.
constexpr std::uint64_t wire_bytes(Bytes bytes) { return bytes < kHeaderSize ? kHeaderSize : bytes; }

void encode_header(const Header& h, std::span<std::byte, kHeaderSize> out);

struct Hello {
  std::uint32_t flow = 0;
  std::uint32_t src = 0;
  std::uint64_t profile_digest = 0;
  std::string token;
};

// Encodes a Hello: kHelloFixedSize bytes and then the token. Throws
// std::invalid_argument if the token is longer than kMaxTokenSize.
std::string encode_hello(const Hello& h);
// Decodes the fixed part; returns the token length to read next, or an error.
struct HelloPrefix {
  Hello hello;  // without its token
  std::size_t token_size = 0;
};
std::optional<HelloPrefix> decode_hello_prefix(std::span<const std::byte, kHelloFixedSize> in, std::string* error);

enum class AcceptStatus : std::uint32_t { ok = 0, bad_token = 1, bad_flow = 2, bad_profile = 3, duplicate = 4 };
const char* accept_status_text(AcceptStatus s);
std::array<std::byte, kAcceptSize> encode_accept(AcceptStatus s);
std::optional<AcceptStatus> decode_accept(std::span<const std::byte, kAcceptSize> in);

// A digest of what both ends of a flow must agree on: ranks, flows and ops.
std::uint64_t profile_digest(const Profile& p);

// Splits one connection's byte stream into messages. Feed it what each read
// returned; it reports a message's start when its header is complete and its end
// when its last byte arrived. Checks each header with `validate`, which returns an
// empty string or the reason to reject it. No allocation.
class Decoder {
 public:
  struct Callbacks {
    virtual ~Callbacks() = default;
    // Empty to accept the header, else why it is wrong.
    virtual std::string validate(const Header& h) = 0;
    virtual void begin(const Header& h) = 0;
    virtual void complete(const Header& h) = 0;
  };

  // Consumes all of `in`. Returns an error message (and stops) on a bad header.
  std::optional<std::string> feed(std::span<const std::byte> in, Callbacks& cb);

  // True between messages: a clean place for the stream to end.
  bool idle() const { return have_ == 0 && remaining_ == 0; }
  std::uint64_t bytes() const { return total_; }
  // Payload bytes still to come of the message being decoded (0 between messages).
  std::uint64_t payload_remaining() const { return remaining_; }

 private:
  std::array<std::byte, kHeaderSize> header_bytes_{};
  std::size_t have_ = 0;  // header bytes gathered so far
  Header current_{};
  std::uint64_t remaining_ = 0;  // payload bytes still to come for current_
  std::uint64_t total_ = 0;
};

}  // namespace tw::frame

// The one header of tensorwire's binary files (capture traces, replay records):
// 16 bytes, an 8-byte magic naming the format, the format's version and the size
// of its fixed-size records, both 32-bit little-endian. Header-only and free of
// dependencies beyond the C++ standard library, because the capture shim, which
// runs inside other people's processes, writes it too.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace tw::binary_file {

inline constexpr std::size_t kHeaderSize = 16;
using Magic = char[8];

inline std::array<unsigned char, kHeaderSize> encode_header(const Magic& magic, std::uint32_t version,
                                                            std::uint32_t record_size) {
  std::array<unsigned char, kHeaderSize> h{};
  std::memcpy(h.data(), magic, 8);
  std::memcpy(h.data() + 8, &version, 4);
  std::memcpy(h.data() + 12, &record_size, 4);
  return h;
}

// Checks the first `n` bytes of a file for a header of `magic` (naming the format
// as `what` in the reason) whose records are `record_size` bytes and whose version
// is at most `version`. Returns "" when they do, else the reason in a few words.
inline std::string check_header(const unsigned char* bytes, std::size_t n, const Magic& magic, const char* what,
                                std::uint32_t version, std::uint32_t record_size) {
  if (n < kHeaderSize || std::memcmp(bytes, magic, 8) != 0) return std::string("not a tensorwire ") + what;
  std::uint32_t v = 0, size = 0;
  std::memcpy(&v, bytes + 8, 4);
  std::memcpy(&size, bytes + 12, 4);
  if (v == 0 || v > version) {
    return std::string(what) + " version " + std::to_string(v) + "; this tensorwire reads up to " + std::to_string(version);
  }
  if (size != record_size) {
    return std::string(what) + " records of " + std::to_string(size) + " bytes; this tensorwire reads " +
           std::to_string(record_size);
  }
  return "";
}

}  // namespace tw::binary_file

// A protobuf encoder of the wire format alone (varints, length-delimited fields,
// fixed64), for the Perfetto and Chakra writers: no generated code, the field
// numbers are the callers'.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tw::view {

class Proto {
 public:
  void clear() { b_.clear(); }
  const std::string& bytes() const { return b_; }
  std::size_t size() const { return b_.size(); }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      b_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    b_.push_back(static_cast<char>(v));
  }
  void tag(int field, int wire) { varint((static_cast<std::uint64_t>(field) << 3) | static_cast<unsigned>(wire)); }
  void u(int field, std::uint64_t v) { tag(field, 0), varint(v); }
  void i(int field, std::int64_t v) { u(field, static_cast<std::uint64_t>(v)); }
  void fixed64(int field, std::uint64_t v) {
    tag(field, 1);
    char c[8];
    std::memcpy(c, &v, 8);  // little-endian host
    b_.append(c, 8);
  }
  void dbl(int field, double d) {
    std::uint64_t v;
    std::memcpy(&v, &d, 8);
    fixed64(field, v);
  }
  void str(int field, std::string_view s) { tag(field, 2), varint(s.size()), b_.append(s); }
  void msg(int field, const Proto& p) { str(field, p.b_); }

 private:
  std::string b_;
};
static_assert(std::endian::native == std::endian::little, "the encoder writes fixed64 in host order");

}  // namespace tw::view

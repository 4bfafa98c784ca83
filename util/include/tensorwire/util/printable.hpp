// Text from files and peers, made safe to print on one line: control characters
// (a newline, an escape sequence that retitles or clears a terminal) become
// \xNN. Errors quote what they read, and what they read may be forged.
#pragma once

#include <string>
#include <string_view>

namespace tw {

inline std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tw

// For fuzz targets of file readers: one private directory per fuzzing process
// (removed at exit), the input written into it as one or more files. An input
// holding several files starts with a 2-byte length of the first; the rest is
// the second.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace tw::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tw-fuzz-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    static const std::string keep = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return tmpl;
  }();
  return dir;
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The two parts of an input: the first 2 bytes (little-endian) give the first
// part's length, clamped to what is there.
inline std::pair<std::string_view, std::string_view> two_parts(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return {{}, {}};
  const std::size_t n = std::min<std::size_t>(data[0] | (data[1] << 8), size - 2);
  const auto* p = reinterpret_cast<const char*>(data + 2);
  return {std::string_view(p, n), std::string_view(p + n, size - 2 - n)};
}

}  // namespace tw::fuzz

#include "tensorwire/controller/progress_line.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tw {

std::string progress_bar(std::uint64_t done, std::uint64_t total, std::optional<Nanos> last_iteration, double bits_per_second) {
  std::string line = "[";
  const int width = 30;
  const int filled = total ? static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width) : 0;
  line += std::string(static_cast<std::size_t>(filled), '=') + std::string(static_cast<std::size_t>(width - filled), ' ') + "] ";
  line += std::to_string(done) + "/" + std::to_string(total) + " iterations";
  if (last_iteration) line += "  " + human_duration(*last_iteration) + "/it  " + human_rate(bits_per_second);
  return line;
}

void ProgressLine::draw(std::uint64_t done, std::uint64_t total, std::optional<Nanos> last_iteration, double bits_per_second) {
  if (quiet_) return;
  const std::string line = progress_bar(done, total, last_iteration, bits_per_second);
  if (::isatty(2)) {
    std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    drew_ = true;
  } else if (done / std::max<std::uint64_t>(1, total / 10) != last_tenth_) {
    last_tenth_ = done / std::max<std::uint64_t>(1, total / 10);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void ProgressLine::end() {
  if (drew_) std::fprintf(stderr, "\r\x1b[K");
  drew_ = false;
}

void ProgressLine::log(const std::string& message) {
  end();
  std::fprintf(stderr, "tensorwire controller: %s\n", message.c_str());
}

}  // namespace tw

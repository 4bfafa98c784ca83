// The controller's progress on stderr: one line redrawn in place on a terminal,
// a line per tenth of the run otherwise, and warnings that clear it first.
// Called on the controller's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensorwire/core/units.hpp"

namespace tw {

// "[=====     ] 3/20 iterations  12.0 ms/it  9.6 Gbit/s" (pure).
std::string progress_bar(std::uint64_t done, std::uint64_t total, std::optional<Nanos> last_iteration, double bits_per_second);

class ProgressLine {
 public:
  explicit ProgressLine(bool quiet) : quiet_(quiet) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine() { end(); }

  void draw(std::uint64_t done, std::uint64_t total, std::optional<Nanos> last_iteration, double bits_per_second);
  // Clears a line drawn in place.
  void end();
  // A warning (a party rejected, an agent turned away): printed even when quiet.
  void log(const std::string& message);

 private:
  bool quiet_;
  bool drew_ = false;
  std::uint64_t last_tenth_ = ~std::uint64_t{0};
};

}  // namespace tw

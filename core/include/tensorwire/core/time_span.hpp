// The times a capture's records can carry, to refuse a damaged one (a trace event
// entered at 0, a pcap record stamped in 2106) before it makes every duration and
// rate of the capture nonsense. capture_span() (trace.hpp) makes one from a
// capture directory's session files.
#pragma once

#include <limits>
#include <string>

#include "tensorwire/core/units.hpp"

namespace tw {

struct TimeSpan {
  Nanos lo = 0;  // CLOCK_REALTIME nanoseconds, inclusive
  Nanos hi = std::numeric_limits<Nanos>::max();
  std::string what = "at or after 0";  // the span in words, for an error: "a time of T ns, not WHAT"
  bool holds(Nanos t) const { return t >= lo && t <= hi; }
};

}  // namespace tw

// The agent's two clocks: CLOCK_MONOTONIC schedules (timers, deadlines),
// CLOCK_REALTIME stamps the records, so that hosts' records share one time line.
#pragma once

#include <time.h>

#include <chrono>

#include "tensorwire/core/units.hpp"

namespace tw {

inline Nanos clock_ns(clockid_t id) {
  timespec ts;
  ::clock_gettime(id, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}
inline Nanos mono_now() { return clock_ns(CLOCK_MONOTONIC); }

inline std::chrono::steady_clock::time_point steady_at(Nanos mono) {
  // libstdc++'s steady_clock is CLOCK_MONOTONIC.
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(mono));
}

}  // namespace tw

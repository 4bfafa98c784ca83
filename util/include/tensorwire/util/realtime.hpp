// CLOCK_REALTIME in nanoseconds: the clock every record and control message uses
// (agents and the controller compare it across hosts; clock sync measures the
// difference). Any thread may call it.
#pragma once

#include <cstdint>

namespace tw {

std::int64_t realtime_ns();

}  // namespace tw

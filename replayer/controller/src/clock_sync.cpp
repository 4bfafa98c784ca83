#include "tensorwire/controller/clock_sync.hpp"

#include <algorithm>
#include <cmath>

namespace tw {

std::optional<ClockEstimate> estimate_clock_offset(std::span<const ClockSample> samples) {
  std::optional<ClockEstimate> best;
  std::size_t usable = 0;
  for (const ClockSample& s : samples) {
    const Nanos rtt = s.received - s.sent;
    if (rtt < 0) continue;  // the controller's clock stepped back: no information
    ++usable;
    if (best && rtt >= best->rtt) continue;
    // (sent + received) / 2 without overflow, rounding down; the bound rounds up
    // so that the true offset stays inside it.
    const Nanos mid = s.sent + rtt / 2;
    best = ClockEstimate{s.remote - mid, (rtt + 1) / 2, rtt, 0};
  }
  if (best) best->samples = usable;
  return best;
}

void ClockTrack::add(Nanos at, const ClockEstimate& estimate) { points_.emplace_back(at, estimate); }

Nanos ClockTrack::offset_at(Nanos agent_time) const {
  if (points_.empty()) return 0;
  // Estimate k holds at agent time at_k + offset_k.
  const auto agent_at = [](const std::pair<Nanos, ClockEstimate>& p) { return p.first + p.second.offset; };
  if (agent_time <= agent_at(points_.front())) return points_.front().second.offset;
  if (agent_time >= agent_at(points_.back())) return points_.back().second.offset;
  const auto it = std::upper_bound(points_.begin(), points_.end(), agent_time,
                                   [&](Nanos t, const auto& p) { return t < agent_at(p); });
  const auto& b = *it;
  const auto& a = *(it - 1);
  const double span = static_cast<double>(agent_at(b) - agent_at(a));
  if (span <= 0) return b.second.offset;
  const double f = static_cast<double>(agent_time - agent_at(a)) / span;
  return a.second.offset + static_cast<Nanos>(std::llround(f * static_cast<double>(b.second.offset - a.second.offset)));
}

Nanos ClockTrack::max_bound() const {
  Nanos m = 0;
  for (const auto& p : points_) m = std::max(m, p.second.bound);
  return m;
}

Nanos ClockTrack::drift() const {
  if (points_.empty()) return 0;
  Nanos lo = points_.front().second.offset, hi = lo;
  for (const auto& p : points_) {
    lo = std::min(lo, p.second.offset);
    hi = std::max(hi, p.second.offset);
  }
  return hi - lo;
}

}  // namespace tw

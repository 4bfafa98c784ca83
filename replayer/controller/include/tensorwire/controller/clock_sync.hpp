// Clock synchronisation between the controller and an agent, NTP style: the
// controller sends a ping at `sent` (its clock), the agent stamps it with its own
// clock (`remote`) and answers, the controller notes `received`. The agent's
// stamp happened somewhere between `sent` and `received`, so for each sample
//   offset = remote - (sent + received) / 2   (agent clock minus controller clock)
// is right to within half the round trip. Of many samples the one with the
// shortest round trip has the tightest bound and is kept.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "tensorwire/core/units.hpp"

namespace tw {

struct ClockSample {
  Nanos sent = 0;      // controller clock
  Nanos remote = 0;    // agent clock
  Nanos received = 0;  // controller clock
};

struct ClockEstimate {
  Nanos offset = 0;  // agent clock minus controller clock
  Nanos bound = 0;   // |true offset - offset| <= bound
  Nanos rtt = 0;     // of the sample kept
  std::size_t samples = 0;
  // An agent-clock time on the controller's clock.
  Nanos to_controller(Nanos agent_time) const { return agent_time - offset; }
  Nanos to_agent(Nanos controller_time) const { return controller_time + offset; }
};

// nullopt when no sample is usable (none, or every round trip negative).
std::optional<ClockEstimate> estimate_clock_offset(std::span<const ClockSample> samples);

// The estimates taken over a run (before the start and periodically after), for
// moving one agent's times onto the controller's clock: between two estimates
// the offset is interpolated linearly (clocks drift), outside them the nearest
// holds.
class ClockTrack {
 public:
  // `at` is the controller-clock time of the estimate; calls in time order.
  void add(Nanos at, const ClockEstimate& estimate);
  bool empty() const { return points_.empty(); }
  const std::vector<std::pair<Nanos, ClockEstimate>>& points() const { return points_; }
  // Agent clock minus controller clock at an agent-clock instant.
  Nanos offset_at(Nanos agent_time) const;
  Nanos to_controller(Nanos agent_time) const { return agent_time - offset_at(agent_time); }
  // The largest error bound of any estimate, and how far the offset moved.
  Nanos max_bound() const;
  Nanos drift() const;

 private:
  std::vector<std::pair<Nanos, ClockEstimate>> points_;
};

}  // namespace tw

// Time dilation (`tensorwire run --time-scale K`): the agents replay a profile
// whose compute times, gaps and delays are K times longer, on a network K times
// slower, and what they measure is scaled back to the original's speed. Pure;
// a value type, any thread.
#pragma once

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

class TimeScale {
 public:
  // Throws std::invalid_argument unless 0 < k <= 1000.
  explicit TimeScale(double k = 1);

  double factor() const { return k_; }
  // The profile the agents replay: `p` itself when k is 1.
  Profile stretch(const Profile& p) const;
  // A time of the original (ns, possibly fractional), at the replay's speed.
  Nanos stretch(double ns) const;
  // A time measured in the replay, at the original's speed.
  Nanos scale_back(Nanos ns) const;

 private:
  double k_;
};

}  // namespace tw

#include "tensorwire/launch/time_scale.hpp"

#include <cmath>
#include <stdexcept>

#include "tensorwire/core/run_dir.hpp"

namespace tw {

TimeScale::TimeScale(double k) : k_(k) {
  if (!(k >= run_dir::kMinTimeScale) || k > run_dir::kMaxTimeScale) throw std::invalid_argument("--time-scale must be from 0.001 to 1000");
}

Profile TimeScale::stretch(const Profile& p) const { return k_ == 1 ? p : time_scaled(p, k_); }

Nanos TimeScale::stretch(double ns) const { return static_cast<Nanos>(std::llround(ns * k_)); }

Nanos TimeScale::scale_back(Nanos ns) const { return static_cast<Nanos>(std::llround(static_cast<double>(ns) / k_)); }

}  // namespace tw

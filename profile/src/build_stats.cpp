// The few statistics the builder's steps share.
#include <algorithm>

#include "build_job.hpp"

namespace tw::build {

Nanos upper_median(std::vector<Nanos> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

Nanos spread(std::vector<Nanos> v) {
  if (v.size() < 2) return 0;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))]; };
  return at(0.9) - at(0.1);
}

}  // namespace tw::build

// What the in-process benchmarks share: medians, and the median wall time of repeated runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tw::bench {

// The middle value (the upper middle of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline double median_seconds(int runs, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return median(std::move(t));
}

// "0.123 s", "45.6 ms" for a table.
inline std::string seconds_text(double s) {
  char b[32];
  if (s >= 1) std::snprintf(b, sizeof b, "%.2f s", s);
  else std::snprintf(b, sizeof b, "%.1f ms", s * 1e3);
  return b;
}

}  // namespace tw::bench

// What the in-process benchmarks share: medians, and the median wall time of repeated runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tw::bench {

// The 1-minute load average (/proc/loadavg), as bench/lib.sh's load1.
inline std::string load1() {
  std::string l;
  std::ifstream("/proc/loadavg") >> l;
  return l.empty() ? "?" : l;
}

// After a table of a fragment with several: the load it was measured at, as
// bench/lib.sh's table_load says it (`at_start`: load1() before the table).
inline void print_table_load(const std::string& at_start) {
  std::printf("\n1-minute load average while this table was measured: %s at the start, %s at the end (nothing else ran).\n",
              at_start.c_str(), load1().c_str());
}

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

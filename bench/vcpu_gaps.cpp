// How often this machine takes a spinning core away: the floor under any start
// precision a spinning sender can reach. Spins on the monotonic clock for
// SECONDS and prints, on one line:
//   ns_per_read gaps_per_s(>10us) percent_lost late_p50 late_p99 late_p999 max_gap_us
// where a gap is the time between two consecutive clock reads above 1 us, and
// late_pXX is the percentile of how late the first clock read after a deadline at
// a random instant comes: P(late > x) = sum over gaps of max(0, gap - x) / SECONDS.
// Usage: vcpu_gaps SECONDS   (run it pinned: taskset -c CORE vcpu_gaps 5)
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

std::int64_t mono() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The x at which the share of time lying more than x inside a gap is `share`.
double late_at(const std::vector<std::int64_t>& gaps, double total, double share) {
  double lo = 0, hi = 1e9;
  for (int i = 0; i < 60; ++i) {
    const double x = (lo + hi) / 2;
    double inside = 0;
    for (const auto g : gaps) inside += std::max(0.0, static_cast<double>(g) - x);
    (inside / total > share ? lo : hi) = x;
  }
  return lo / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  if (seconds <= 0 || seconds > 600) {
    std::fprintf(stderr, "usage: vcpu_gaps SECONDS (0 < SECONDS <= 600)\n");
    return 2;
  }
  std::vector<std::int64_t> gaps;
  gaps.reserve(1 << 20);
  const std::int64_t start = mono(), end = start + static_cast<std::int64_t>(seconds * 1e9);
  std::int64_t prev = start;
  std::uint64_t reads = 0;
  while (prev < end) {
    const std::int64_t t = mono();
    ++reads;
    if (t - prev > 1000 && gaps.size() < gaps.capacity()) gaps.push_back(t - prev);
    prev = t;
  }
  if (gaps.size() == gaps.capacity()) std::fprintf(stderr, "vcpu_gaps: more gaps than it keeps; the figures count the first %zu\n", gaps.size());
  const double total = static_cast<double>(prev - start);
  std::int64_t lost = 0, over10 = 0;
  for (const auto g : gaps) {
    lost += g;
    over10 += g > 10'000;
  }
  std::printf("%.1f %.0f %.2f %.1f %.1f %.1f %.1f\n", total / static_cast<double>(reads),
              static_cast<double>(over10) / (total / 1e9), 100.0 * static_cast<double>(lost) / total,
              late_at(gaps, total, 0.5), late_at(gaps, total, 0.01), late_at(gaps, total, 0.001),
              gaps.empty() ? 0.0 : static_cast<double>(*std::max_element(gaps.begin(), gaps.end())) / 1e3);
  return 0;
}

// What the views of captures and runs draw alike: a message with its stages, a
// throughput counter, the "about" track.
#pragma once

#include <algorithm>
#include <vector>

#include "tensorwire/view/view.hpp"

namespace tw::view::draw {

struct MessageTimes {
  Nanos ready = -1;       // the sender asked to send
  Nanos sent = -1;        // the kernel had taken the last byte
  Nanos wire_first = -1;  // its first byte seen on the wire (or left the host)
  Nanos wire_last = -1;   // its last byte
  Nanos acked = -1;       // the ACK of its last byte
  Nanos end() const { return std::max({ready, sent, wire_last, acked}); }
};

// The parent slice [ready, end] on a free lane, with its stages inside it, one
// after the other: queued in the local stack (ready to the first byte on the
// wire), on the wire (first to last byte), awaiting the ACK (last byte to its
// ACK). A stage whose times are unknown is left out; times that run backwards
// (clock granularity) are clamped into order.
inline SliceRef message(View& v, Lanes& lanes, const MessageTimes& t, StrId name, StrId category) {
  const Nanos end = std::max(t.end(), t.ready);
  const std::uint32_t track = lanes.place(t.ready, end);
  const SliceRef parent = v.add_slice(track, t.ready, end, name, 0, category);
  if (t.wire_first < 0) return parent;
  static constexpr const char* kStage[] = {"queued in stack", "on the wire", "awaiting ACK"};
  const Nanos edges[] = {t.ready, t.wire_first, t.wire_last, t.acked};
  Nanos at = t.ready;
  const StrId stage = v.intern("stage");
  for (int i = 0; i < 3; ++i) {
    if (edges[i] < 0 || edges[i + 1] < 0) break;
    const Nanos b = std::clamp(edges[i], at, end), e = std::clamp(edges[i + 1], b, end);
    v.add_slice(track, b, e, v.intern(kStage[i]), 1, stage);
    at = e;
  }
  return parent;
}

struct Transfer {
  Nanos begin = 0, end = 0;
  std::uint64_t bytes = 0;
};
// Bits per second in bins of `bin`, each transfer's bytes spread evenly over
// its time; a bin with nothing is 0.
inline std::vector<std::pair<Nanos, double>> throughput(std::vector<Transfer> xs, Nanos bin) {
  std::vector<std::pair<Nanos, double>> out;
  if (xs.empty() || bin <= 0) return out;
  Nanos lo = xs.front().begin, hi = xs.front().end;
  for (const Transfer& x : xs) lo = std::min(lo, x.begin), hi = std::max(hi, std::max(x.end, x.begin));
  // At most 4 M bins: wider bins for a longer span.
  bin = std::max(bin, (hi - lo) / 4'000'000 + 1);
  const std::size_t n = static_cast<std::size_t>((hi - lo) / bin) + 1;
  std::vector<double> bytes(n, 0);
  for (const Transfer& x : xs) {
    const Nanos b = x.begin, e = std::max(x.end, x.begin + 1);
    const double per_ns = static_cast<double>(x.bytes) / static_cast<double>(e - b);
    for (std::size_t k = static_cast<std::size_t>((b - lo) / bin); k < n; ++k) {
      const Nanos kb = lo + static_cast<Nanos>(k) * bin, ke = kb + bin;
      if (kb >= e) break;
      bytes[k] += per_ns * static_cast<double>(std::min(e, ke) - std::max(b, kb));
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    const double bps = bytes[k] * 8e9 / static_cast<double>(bin);
    if (out.empty() || out.back().second != bps || k + 1 == n) out.emplace_back(lo + static_cast<Nanos>(k) * bin, bps);
  }
  out.emplace_back(lo + static_cast<Nanos>(n) * bin, 0.0);
  return out;
}

// A counter track under `parent` with `samples` (nothing when there are none).
inline void counter(View& v, std::uint64_t parent, std::string name, std::string unit, std::vector<std::pair<Nanos, double>> samples) {
  if (samples.empty()) return;
  const std::uint32_t t = v.add_track(parent, std::move(name), TrackKind::counter, std::move(unit));
  v.tracks[t].samples = std::move(samples);
}

// The bin that thins a span of `span` to about `points` samples (at least 1 us).
inline Nanos bin_for(Nanos span, std::size_t points) {
  return std::max<Nanos>(1000, span / static_cast<Nanos>(std::max<std::size_t>(points, 1)));
}

// Sorts by begin: lanes are filled in time order.
template <typename T, typename F>
void by_time(std::vector<T>& xs, F begin_of) {
  std::stable_sort(xs.begin(), xs.end(), [&](const T& a, const T& b) { return begin_of(a) < begin_of(b); });
}

}  // namespace tw::view::draw

#include "tensorwire/analysis/link_rates.hpp"

#include <algorithm>
#include <utility>

#include "tensorwire/core/units.hpp"

namespace tw {
namespace {

// One direction of one rank's link: what it carried per iteration.
struct Direction {
  double bytes = 0;
  Nanos busy = 0;
  double peak_bps = 0;  // the fastest iteration
  double message_bps = 0;  // the fastest message
};

Nanos union_length(std::vector<std::pair<Nanos, Nanos>>& spans) {
  std::sort(spans.begin(), spans.end());
  Nanos total = 0, b = 0, e = -1;
  for (const auto& s : spans) {
    if (e < 0 || s.first > e) {
      if (e >= 0) total += e - b;
      b = s.first;
      e = s.second;
    } else {
      e = std::max(e, s.second);
    }
  }
  if (e >= 0) total += e - b;
  return total;
}

double bps(double bytes, Nanos ns) { return ns > 0 ? bytes * 8e9 / static_cast<double>(ns) : 0; }

}  // namespace

MeasuredLinks measure_links(const Profile& p, const Timeline& t, Nanos delay) {
  const std::size_t ranks = p.ranks.size();
  std::vector<Direction> out(ranks), in(ranks);
  std::vector<std::vector<std::pair<Nanos, Nanos>>> out_spans(ranks), in_spans(ranks);
  std::vector<double> out_bytes(ranks), in_bytes(ranks);
  const auto close_iteration = [&](std::vector<Direction>& d, std::vector<std::vector<std::pair<Nanos, Nanos>>>& spans,
                                   std::vector<double>& bytes) {
    for (std::size_t r = 0; r < ranks; ++r) {
      const Nanos busy = union_length(spans[r]);
      d[r].bytes += bytes[r];
      d[r].busy += busy;
      d[r].peak_bps = std::max(d[r].peak_bps, bps(bytes[r], busy));
      spans[r].clear();
      bytes[r] = 0;
    }
  };
  for (std::size_t i = 0; i < t.iterations; ++i) {
    for (std::size_t op = 0; op < p.ops.size() && op < t.ops.size(); ++op) {
      const Op& o = p.ops[op];
      if (o.type != OpType::send || i >= t.ops[op].size()) continue;
      const Instance& rec = t.ops[op][i];
      // The message's end is its hand-over: take off the emulated delay and the
      // flow's read lag (of which the agent adds no more), to leave the transfer.
      const Nanos held = delay + p.flows[o.flow].read_lag;
      const Instance x = {rec.start, rec.end < 0 ? rec.end : rec.end - held};
      if (x.start < 0 || x.end <= x.start) continue;
      const Flow& f = p.flows[o.flow];
      const auto b = static_cast<double>(o.bytes);
      out_spans[f.src].emplace_back(x.start, x.end);
      in_spans[f.dst].emplace_back(x.start, x.end);
      out_bytes[f.src] += b;
      in_bytes[f.dst] += b;
      const double rate = bps(b, x.end - x.start);
      out[f.src].message_bps = std::max(out[f.src].message_bps, rate);
      in[f.dst].message_bps = std::max(in[f.dst].message_bps, rate);
    }
    close_iteration(out, out_spans, out_bytes);
    close_iteration(in, in_spans, in_bytes);
  }
  MeasuredLinks m;
  m.busy.resize(ranks);
  m.peak.resize(ranks);
  m.message.resize(ranks);
  // A hair faster, so that rounding a transfer time up to whole nanoseconds
  // never puts a term of the bound above the time it was measured from.
  constexpr double kUp = 1 + 1e-9;
  for (std::size_t r = 0; r < ranks; ++r) {
    m.busy[r] = {bps(out[r].bytes, out[r].busy), bps(in[r].bytes, in[r].busy)};
    m.peak[r] = {out[r].peak_bps * kUp, in[r].peak_bps * kUp};
    m.message[r] = {out[r].message_bps * kUp, in[r].message_bps * kUp};
  }
  for (RankLinks* links : {&m.busy, &m.peak, &m.message}) {
    double fastest = 0;
    for (const RankLink& l : *links) fastest = std::max({fastest, l.egress_bps, l.ingress_bps});
    if (!(fastest > 0)) return m;
    for (RankLink& l : *links) {
      if (!(l.egress_bps > 0)) l.egress_bps = fastest;
      if (!(l.ingress_bps > 0)) l.ingress_bps = fastest;
    }
  }
  m.known = true;
  return m;
}

std::string links_summary(const RankLinks& links) {
  const auto range = [&links](double RankLink::*rate) {
    double lo = 0, hi = 0;
    for (const RankLink& l : links) {
      lo = lo == 0 ? l.*rate : std::min(lo, l.*rate);
      hi = std::max(hi, l.*rate);
    }
    if (lo == hi) return human_rate(hi);
    std::string a = human_rate(lo), b = human_rate(hi);
    // "3.10 Gb/s" and "9.87 Gb/s" share the unit: "3.10-9.87 Gb/s".
    const auto sa = a.find(' '), sb = b.find(' ');
    if (sa != std::string::npos && sb != std::string::npos && a.substr(sa) == b.substr(sb)) a.resize(sa);
    return a + "-" + b;
  };
  return range(&RankLink::egress_bps) + " out, " + range(&RankLink::ingress_bps) + " in";
}

}  // namespace tw

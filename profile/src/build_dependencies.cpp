// What each send waited for, from many iterations of the same schedule.
//
// A send's candidates are the events on its rank that completed before it became
// ready in every iteration: its rank's other sends (the last call returned) and
// the messages that arrived at its rank (the last byte was read). In each
// iteration the latest candidate is the one the send waited for; a candidate
// that was the latest in at least a tenth of the iterations, and after which the
// send's wait varied less than after the rank's own start of the iteration, is a
// dependency. The
// scan looks at the latest kWindow candidates (by their median time in the
// iteration), which keeps it linear in the number of sends.
#include <algorithm>
#include <cmath>

#include "build_job.hpp"

namespace tw::build {

namespace {

constexpr std::size_t kWindow = 64;
constexpr double kBindingShare = 0.1;
constexpr std::size_t kMinStabilitySamples = 4;  // fewer iterations say nothing about a gap's spread
constexpr double kStableShare = 0.9;

struct Candidate {
  OpIndex op = 0;
  bool recv = false;
  Nanos median = 0;  // completion, relative to the rank's start of the iteration
  const std::vector<Nanos>* times = nullptr;
};

Nanos relative_median(const std::vector<Nanos>& t, const std::vector<Nanos>& start) {
  std::vector<Nanos> rel;
  rel.reserve(t.size());
  for (std::size_t k = 0; k < t.size() && k < start.size(); ++k) {
    if (t[k] >= 0) rel.push_back(t[k] - start[k]);
  }
  return upper_median(std::move(rel));
}

}  // namespace

Inferred infer_dependencies(const std::vector<SendTimes>& sends, const std::vector<std::vector<Nanos>>& rank_start) {
  Inferred out;
  out.after.resize(sends.size());
  out.wait.resize(sends.size());
  out.from.resize(sends.size());
  const std::size_t ranks = rank_start.size();
  std::vector<std::vector<Candidate>> by_rank(ranks);
  for (std::size_t i = 0; i < sends.size(); ++i) {
    const SendTimes& s = sends[i];
    if (s.rank < ranks) by_rank[s.rank].push_back({static_cast<OpIndex>(i), false, relative_median(s.sent, rank_start[s.rank]), &s.sent});
    // A receipt as a candidate: when the job read it (what its next op followed),
    // or the receipt where the read is unknown. The wait after it counts from
    // the receipt (below), so a job that read late keeps its busy time there.
    const std::vector<Nanos>& trigger = s.read.size() == s.received.size() ? s.read : s.received;
    if (s.dst < ranks) by_rank[s.dst].push_back({static_cast<OpIndex>(i), true, relative_median(trigger, rank_start[s.dst]), &trigger});
  }
  for (auto& v : by_rank) {
    std::stable_sort(v.begin(), v.end(), [](const Candidate& x, const Candidate& y) { return x.median < y.median; });
  }
  // When each own send let its thread go on, for the waits after it: its last
  // call's return, but no later than its usual call time after it began. A call
  // that took longer than usual (the thread descheduled inside it: 2.3 ms once
  // with 3 ranks on 2 cores) held the thread, not the network, and the replay's
  // send returns at once; that time goes into the wait of what came next.
  std::vector<std::vector<Nanos>> held(sends.size());
  for (std::size_t i = 0; i < sends.size(); ++i) {
    const SendTimes& s = sends[i];
    std::vector<Nanos> calls;
    for (std::size_t k = 0; k < s.sent.size(); ++k) {
      if (s.sent[k] >= 0 && s.ready[k] >= 0) calls.push_back(s.sent[k] - s.ready[k]);
    }
    const Nanos usual = calls.empty() ? 0 : percentile(std::move(calls), 0.5);
    held[i] = s.sent;
    for (std::size_t k = 0; k < s.sent.size(); ++k) {
      if (s.sent[k] >= 0 && s.ready[k] >= 0) held[i][k] = std::min(s.sent[k], s.ready[k] + usual);
    }
  }
  std::vector<const Candidate*> valid;
  std::vector<std::size_t> binding;
  for (std::size_t i = 0; i < sends.size(); ++i) {
    const SendTimes& s = sends[i];
    if (s.rank >= ranks) continue;
    const std::vector<Nanos>& start = rank_start[s.rank];
    const std::size_t iterations = std::min(s.ready.size(), start.size());
    const std::vector<Candidate>& cands = by_rank[s.rank];
    const Nanos ready_median = relative_median(s.ready, start);
    auto end = std::upper_bound(cands.begin(), cands.end(), ready_median, [](Nanos t, const Candidate& c) { return t < c.median; });
    valid.clear();
    for (std::size_t n = 0; end != cands.begin() && n < kWindow; ++n) {
      const Candidate& c = *--end;
      if (c.op == i && !c.recv) continue;
      bool before = true;
      for (std::size_t k = 0; k < iterations && before; ++k) {
        const Nanos t = (*c.times)[k];
        before = t >= 0 && s.ready[k] >= 0 && t <= s.ready[k];
      }
      if (before) valid.push_back(&c);
    }
    binding.assign(valid.size(), 0);
    for (std::size_t k = 0; k < iterations; ++k) {
      std::size_t latest = valid.size();
      for (std::size_t v = 0; v < valid.size(); ++v) {
        if (latest == valid.size() || (*valid[v]->times)[k] > (*valid[latest]->times)[k]) latest = v;
      }
      if (latest < valid.size()) ++binding[latest];
    }
    const auto needed = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(kBindingShare * static_cast<double>(iterations))));
    for (std::size_t v = 0; v < valid.size(); ++v) {
      if (binding[v] < needed) continue;
      // The gap must be stable: where the candidate was the latest, the wait after
      // it must vary less than the wait after the rank's start of the iteration
      // (an early unrelated event is always before, but says nothing).
      std::vector<Nanos> after_it, after_start;
      for (std::size_t k = 0; k < iterations; ++k) {
        const Nanos t = (*valid[v]->times)[k];
        bool latest = true;
        for (const Candidate* o : valid) latest = latest && (*o->times)[k] <= t;
        if (!latest) continue;
        after_it.push_back(s.ready[k] - t);
        after_start.push_back(s.ready[k] - start[k]);
      }
      if (after_it.size() >= kMinStabilitySamples && spread(after_it) > kStableShare * spread(after_start)) continue;
      out.after[i].push_back({valid[v]->op, valid[v]->recv, 0});
    }
    // File order is by time: the earliest dependency first.
    std::sort(out.after[i].begin(), out.after[i].end(), [&](const Dependency& x, const Dependency& y) {
      const auto t = [&](const Dependency& d) { return relative_median(d.recv ? sends[d.op].received : sends[d.op].sent, start); };
      return t(x) < t(y);
    });
    out.wait[i].assign(iterations, 0);
    out.from[i].assign(iterations, 0);
    for (std::size_t k = 0; k < iterations; ++k) {
      Nanos from = start[k];
      for (const Dependency& d : out.after[i]) from = std::max(from, d.recv ? sends[d.op].received[k] : held[d.op][k]);
      out.from[i][k] = from;
      out.wait[i][k] = std::max<Nanos>(0, s.ready[k] - from);
    }
  }
  return out;
}

}  // namespace tw::build

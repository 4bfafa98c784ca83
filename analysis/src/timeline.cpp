#include "tensorwire/analysis/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tw {

namespace {

// The time covered by a set of intervals.
Nanos covered(std::vector<std::pair<Nanos, Nanos>> v) {
  std::sort(v.begin(), v.end());
  Nanos total = 0, cur_b = 0, cur_e = -1;
  for (const auto& [b, e] : v) {
    if (cur_e < 0 || b > cur_e) {
      if (cur_e >= 0) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e >= 0) total += cur_e - cur_b;
  return total;
}

}  // namespace

Timeline timeline_from_records(const Profile& p, const std::vector<std::vector<Record>>& ranks, std::string source) {
  Timeline t;
  t.source = std::move(source);
  std::size_t n = 0;
  for (const auto& recs : ranks) {
    for (const Record& r : recs) {
      if (r.is(RecordKind::iteration)) n = std::max<std::size_t>(n, r.as<IterationRecord>().iteration + std::size_t{1});
    }
  }
  t.iterations = n;
  constexpr Nanos kNone = std::numeric_limits<Nanos>::min();
  std::vector<Nanos> start(n, std::numeric_limits<Nanos>::max()), end(n, kNone);
  // An iteration's time runs from the end of the one before (job-wide: the
  // last rank's; per rank: its own), the first's from its start: staggered
  // ranks would otherwise count the stagger in two iterations.
  t.rank_iteration.assign(ranks.size(), std::vector<Nanos>(n, -1));
  std::vector<std::vector<Nanos>> rank_start(ranks.size(), std::vector<Nanos>(n, kNone)), rank_end = rank_start;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (const Record& rec : ranks[r]) {
      if (!rec.is(RecordKind::iteration)) continue;
      const auto x = rec.as<IterationRecord>();
      if (x.iteration >= n) continue;
      start[x.iteration] = std::min(start[x.iteration], x.start);
      end[x.iteration] = std::max(end[x.iteration], x.end);
      rank_start[r][x.iteration] = x.start;
      rank_end[r][x.iteration] = x.end;
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (rank_end[r][i] == kNone) continue;
      const bool after = i > 0 && rank_end[r][i - 1] != kNone && rank_end[r][i - 1] <= rank_end[r][i];
      t.rank_iteration[r][i] = rank_end[r][i] - (after ? rank_end[r][i - 1] : rank_start[r][i]);
    }
  }
  t.iteration.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (end[i] == kNone || start[i] == std::numeric_limits<Nanos>::max()) continue;
    // A partial run (a rank's records of i missing) can end i before i - 1.
    const bool after = i > 0 && end[i - 1] != kNone && end[i - 1] <= end[i];
    t.iteration[i] = end[i] - (after ? end[i - 1] : start[i]);
  }
  t.ops.assign(p.ops.size(), std::vector<Instance>(n));
  t.planned.assign(p.ops.size() * n, -1);
  t.flow_bytes.assign(p.flows.size(), 0);
  t.flow_busy.assign(p.flows.size(), 0);
  std::vector<std::vector<std::pair<Nanos, Nanos>>> busy(p.flows.size());
  std::vector<Nanos> ready_abs(p.ops.size() * n, -1);
  const auto rel = [&](std::uint32_t it, Nanos abs) { return abs < 0 || start[it] == std::numeric_limits<Nanos>::max() ? -1 : abs - start[it]; };
  for (const auto& recs : ranks) {
    for (const Record& rec : recs) {
      const auto times = op_times(rec);
      if (!times) continue;
      const OpTimes& x = *times;
      if (x.op >= p.ops.size() || x.iteration >= n) continue;
      Instance& in = t.ops[x.op][x.iteration];
      const std::size_t k = static_cast<std::size_t>(x.op) * n + x.iteration;
      switch (x.kind) {
        case RecordKind::send:
          in.start = rel(x.iteration, x.start);
          in.sent = rel(x.iteration, x.completed);
          t.planned[k] = rel(x.iteration, x.planned);
          ready_abs[k] = x.start;
          if (x.flow < p.flows.size()) t.flow_bytes[x.flow] += x.bytes;
          break;
        case RecordKind::receive:
          in.end = rel(x.iteration, x.completed);
          break;
        case RecordKind::compute:
          in.start = rel(x.iteration, x.start);
          in.end = rel(x.iteration, x.completed);
          t.planned[k] = rel(x.iteration, x.planned);
          break;
        default:
          break;
      }
    }
  }
  // A flow is busy from a message's ready to its arrival.
  for (std::size_t op = 0; op < p.ops.size(); ++op) {
    if (p.ops[op].type != OpType::send) continue;
    for (std::size_t i = 0; i < n; ++i) {
      const Instance& in = t.ops[op][i];
      if (in.end >= 0 && ready_abs[op * n + i] >= 0) {
        const Nanos b = ready_abs[op * n + i];
        busy[p.ops[op].flow].emplace_back(b, b + (in.end - in.start));
      }
    }
  }
  for (std::size_t f = 0; f < busy.size(); ++f) t.flow_busy[f] = covered(std::move(busy[f]));
  return t;
}

Timeline timeline_from_observed(const Profile& p) {
  Timeline t;
  t.source = "observed timings";
  if (!p.observed) return t;
  const Observed& o = *p.observed;
  std::size_t n = o.iterations.size();
  for (const ObservedOp& x : o.ops) n = std::max<std::size_t>(n, x.iteration + std::size_t{1});
  t.iterations = n;
  t.iteration.assign(n, -1);
  bool per_rank = false;
  for (const auto& it : o.iterations) per_rank = per_rank || !it.rank_durations.empty();
  if (per_rank) t.rank_iteration.assign(p.ranks.size(), std::vector<Nanos>(n, -1));
  for (std::size_t i = 0; i < o.iterations.size(); ++i) {
    t.iteration[i] = o.iterations[i].duration;
    for (std::size_t r = 0; r < o.iterations[i].rank_durations.size() && r < p.ranks.size(); ++r) {
      t.rank_iteration[r][i] = o.iterations[i].rank_durations[r];
    }
  }
  if (!o.ops.empty()) {
    t.ops.assign(p.ops.size(), std::vector<Instance>(n));
    for (const ObservedOp& x : o.ops) t.ops[x.op][x.iteration] = {x.start, x.end};
    // Flows busy from a message's start to its arrival, as for a replay. Observed
    // times are relative to their iteration: iterations are laid end to end.
    std::vector<Nanos> at(n, 0);
    for (std::size_t i = 1; i < n; ++i) at[i] = at[i - 1] + std::max<Nanos>(0, t.iteration[i - 1]);
    t.flow_bytes.assign(p.flows.size(), 0);
    t.flow_busy.assign(p.flows.size(), 0);
    std::vector<std::vector<std::pair<Nanos, Nanos>>> busy(p.flows.size());
    for (const ObservedOp& x : o.ops) {
      const Op& op = p.ops[x.op];
      if (op.type != OpType::send || x.end < x.start || op.flow >= p.flows.size()) continue;
      t.flow_bytes[op.flow] += op.bytes;
      busy[op.flow].emplace_back(at[x.iteration] + x.start, at[x.iteration] + x.end);
    }
    for (std::size_t f = 0; f < busy.size(); ++f) t.flow_busy[f] = covered(std::move(busy[f]));
  }
  return t;
}

Timeline timeline_from_plan(const Timeline& replay, Nanos iteration_bound) {
  Timeline t;
  t.source = "the profile's plan";
  t.iterations = replay.iterations;
  t.iteration.assign(t.iterations, iteration_bound);
  const std::size_t n = t.iterations;
  t.ops.assign(replay.ops.size(), std::vector<Instance>(n));
  for (std::size_t op = 0; op < replay.ops.size(); ++op) {
    for (std::size_t i = 0; i < n; ++i) t.ops[op][i].start = replay.planned[op * n + i];
  }
  return t;
}

void scale_timeline(Timeline& t, double f) {
  const auto s = [f](Nanos& x) {
    if (x != -1) x = static_cast<Nanos>(std::llround(static_cast<double>(x) * f));
  };
  for (Nanos& x : t.iteration) s(x);
  for (auto& r : t.rank_iteration) {
    for (Nanos& x : r) s(x);
  }
  for (auto& op : t.ops) {
    for (Instance& in : op) {
      s(in.start);
      s(in.end);
      s(in.sent);
    }
  }
  for (Nanos& x : t.flow_busy) s(x);
  for (Nanos& x : t.planned) s(x);
}

double flow_rate_bps(const Timeline& t, FlowIndex flow) {
  if (flow >= t.flow_bytes.size() || flow >= t.flow_busy.size() || t.flow_busy[flow] <= 0) return 0;
  return static_cast<double>(t.flow_bytes[flow]) * 8e9 / static_cast<double>(t.flow_busy[flow]);
}

}  // namespace tw

#include "tensorwire/analysis/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>

namespace tw {
namespace {

struct Event {
  Nanos at;
  std::uint64_t seq;  // ties: first scheduled, first delivered
  enum class Kind : std::uint8_t { wake, compute_done, send_done, received } kind;
  RankId rank;
  OpIndex op;
  std::uint32_t iteration;
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

}  // namespace

SimResult simulate(const Profile& p, const SimOptions& o) {
  const std::size_t n = p.ranks.size();
  std::vector<Executor> ranks;
  ranks.reserve(n);
  for (std::size_t r = 0; r < n; ++r) {
    ExecutorOptions eo = o.executor;
    if (!o.slowdown.empty()) eo.slowdown = o.slowdown.at(r);
    ranks.emplace_back(p, static_cast<RankId>(r), eo);
  }
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::uint64_t seq = 0;
  std::vector<Nanos> egress_free(n, 0), ingress_free(n, 0);
  std::vector<Nanos> wake_pending(n, -1);
  SimResult result;
  result.rank_iterations.resize(n);
  // Index of each in-flight op instance's timing entry, to fill in its end.
  std::vector<std::size_t> open_entry(p.ops.size(), 0);

  const auto drain = [&](RankId r, Nanos now) {
    Executor& ex = ranks[r];
    Action a;
    while (ex.next_action(a)) {
      const Op& op = p.ops[a.op];
      const Nanos start = std::max(now, a.at);
      open_entry[a.op] = result.ops.size();
      if (a.kind == Action::Kind::compute) {
        result.ops.push_back({a.op, a.iteration, a.at, start, start + a.duration, -1});
        events.push({start + a.duration, seq++, Event::Kind::compute_done, r, a.op, a.iteration});
      } else {
        const RankId dst = p.flows[op.flow].dst;
        const Nanos begin = std::max({start, egress_free[r], ingress_free[dst]});
        const auto transfer = static_cast<Nanos>(std::ceil(static_cast<double>(op.bytes) * 8e9 / o.link_bps));
        const Nanos end = begin + transfer;
        egress_free[r] = ingress_free[dst] = end;
        result.ops.push_back({a.op, a.iteration, a.at, start, end, end + o.latency});
        events.push({end, seq++, Event::Kind::send_done, r, a.op, a.iteration});
        events.push({end + o.latency, seq++, Event::Kind::received, dst, a.op, a.iteration});
      }
    }
    if (const auto wake = ex.next_wake(); wake && wake_pending[r] != *wake) {
      wake_pending[r] = *wake;
      events.push({*wake, seq++, Event::Kind::wake, r, 0, 0});
    }
    Executor::IterationTimes it;
    while (ex.pop_completed(it)) result.rank_iterations[r].push_back(it);
  };

  for (std::size_t r = 0; r < n; ++r) {
    ranks[r].start(0);
    drain(static_cast<RankId>(r), 0);
  }
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    Executor& ex = ranks[e.rank];
    switch (e.kind) {
      case Event::Kind::wake:
        if (wake_pending[e.rank] == e.at) wake_pending[e.rank] = -1;
        ex.tick(e.at);
        break;
      case Event::Kind::compute_done: ex.compute_done(e.op, e.iteration, e.at); break;
      case Event::Kind::send_done: ex.send_done(e.op, e.iteration, e.at); break;
      case Event::Kind::received: ex.received(e.op, e.iteration, e.at); break;
    }
    result.makespan = std::max(result.makespan, e.at);
    drain(e.rank, e.at);
  }
  for (std::size_t r = 0; r < n; ++r) {
    if (!ranks[r].finished()) {
      throw std::runtime_error("simulation stalled: rank " + std::to_string(r) + " waits at " + ranks[r].waiting_for());
    }
  }
  const std::uint64_t iterations = ranks.empty() ? 0 : ranks[0].iterations();
  result.iteration_end.assign(iterations, 0);
  for (const auto& its : result.rank_iterations) {
    for (const auto& it : its) result.iteration_end[it.iteration] = std::max(result.iteration_end[it.iteration], it.end);
  }
  return result;
}

std::vector<Nanos> SimResult::iteration_times() const {
  std::vector<Nanos> out;
  Nanos prev = 0;
  for (Nanos end : iteration_end) {
    out.push_back(end - prev);
    prev = end;
  }
  return out;
}

OpenLoopPlan open_loop_plan(const Profile& p, double link_bps) {
  OpenLoopPlan plan;
  plan.offsets.assign(p.ops.size(), 0);
  if (p.observed && !p.observed->ops.empty()) {
    std::vector<Nanos> sum(p.ops.size(), 0);
    std::vector<Nanos> count(p.ops.size(), 0);
    for (const auto& o : p.observed->ops) {
      sum[o.op] += o.start;
      ++count[o.op];
    }
    for (std::size_t i = 0; i < p.ops.size(); ++i) plan.offsets[i] = count[i] > 0 ? sum[i] / count[i] : 0;
    std::vector<Nanos> durations;
    for (const auto& it : p.observed->iterations) durations.push_back(it.duration);
    if (!durations.empty()) plan.period = percentile(std::move(durations), 0.5);
    plan.source = "observed";
  }
  if (plan.period == 0) {
    Profile one = p;
    one.iterations = 1;
    one.observed.reset();
    SimOptions o;
    o.link_bps = link_bps;
    const SimResult r = simulate(one, o);
    if (plan.source.empty()) {
      for (const auto& t : r.ops) plan.offsets[t.op] = t.start;
      plan.source = "simulated at " + human_rate(link_bps);
    }
    plan.period = std::max<Nanos>(r.makespan, 1);
  }
  return plan;
}

}  // namespace tw

#include "tensorwire/analysis/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <utility>

#include "tensorwire/core/profile_slice.hpp"

namespace tw {
namespace {

struct Event {
  Nanos at;
  std::uint64_t seq;  // ties: first scheduled, first delivered
  enum class Kind : std::uint8_t { wake, compute_done, send_done, received } kind;
  RankId rank;
  OpIndex op;  // in the rank's slice
  std::uint32_t iteration;
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

// The messages in flight and their rates: every rank's egress and ingress is
// shared max-min fairly (progressive filling) among the messages crossing it, and
// rates are worked out again whenever messages start or end (once for all that
// do at one instant, before the network is next asked about). A message whose
// rate does not change keeps its anchor, so one message alone ends exactly
// transfer_time() after it began, as the lower bound assumes.
class Network {
 public:
  struct Transfer {
    OpIndex op;
    std::uint32_t iteration;
    RankId src, dst;
    std::size_t entry;  // its SimOpTiming
    double bits_left;  // at `since`
    Nanos since;
    double bps = 0;
    Nanos done = 0;
  };

  explicit Network(RankLinks links) : links_(std::move(links)) {}

  bool empty() const { return active_.empty(); }
  Nanos next_done() {
    settle();
    return next_done_;
  }

  // The rates are worked out again once for all the messages that start at one
  // instant (a rank that starts N sends at once: one sharing, not N), when the
  // network is next asked about.
  void start(const Transfer& t, Nanos now) {
    if (pending_ && now != pending_at_) settle();
    active_.push_back(t);
    pending_ = true, pending_at_ = now;
  }

  // Removes and returns the transfers done at `now`.
  std::vector<Transfer> finish(Nanos now) {
    settle();
    std::vector<Transfer> done;
    for (std::size_t i = 0; i < active_.size();) {
      if (active_[i].done <= now) {
        done.push_back(active_[i]);
        active_[i] = active_.back();
        active_.pop_back();
      } else {
        ++i;
      }
    }
    pending_ = true, pending_at_ = now;
    return done;
  }

 private:
  void settle() {
    if (!pending_) return;
    pending_ = false;
    reallocate(pending_at_);
    next_done_ = std::numeric_limits<Nanos>::max();
    for (const Transfer& x : active_) next_done_ = std::min(next_done_, x.done);
  }

  void reallocate(Nanos now) {
    const std::size_t n = links_.size();
    // Links 0..n-1 are egress, n..2n-1 ingress.
    std::vector<double> left(2 * n);
    for (std::size_t r = 0; r < n; ++r) left[r] = links_[r].egress_bps, left[n + r] = links_[r].ingress_bps;
    std::vector<double> rate(active_.size(), 0);
    std::vector<bool> frozen(active_.size(), false);
    std::size_t unfrozen = active_.size();
    // No link shared (a ring's neighbours, one message each): every message has
    // the smaller of its two links, which is what the filling below would give
    // after one round per distinct rate (hundreds of rounds for 256 ranks whose
    // measured link rates all differ, at every start and end of a message).
    std::vector<std::uint32_t> crossing(2 * n, 0);
    bool shared = false;
    for (const Transfer& t : active_) shared |= ++crossing[t.src] > 1 || ++crossing[n + t.dst] > 1;
    if (!shared) {
      for (std::size_t i = 0; i < active_.size(); ++i) rate[i] = std::min(left[active_[i].src], left[n + active_[i].dst]);
      unfrozen = 0;
    }
    while (unfrozen > 0) {
      std::vector<std::size_t> users(2 * n, 0);
      for (std::size_t i = 0; i < active_.size(); ++i) {
        if (frozen[i]) continue;
        ++users[active_[i].src];
        ++users[n + active_[i].dst];
      }
      double inc = std::numeric_limits<double>::infinity();
      for (std::size_t l = 0; l < 2 * n; ++l) {
        if (users[l] > 0) inc = std::min(inc, std::max(0.0, left[l]) / static_cast<double>(users[l]));
      }
      std::vector<bool> full(2 * n, false);
      for (std::size_t l = 0; l < 2 * n; ++l) full[l] = users[l] > 0 && std::max(0.0, left[l]) / static_cast<double>(users[l]) <= inc;
      for (std::size_t i = 0; i < active_.size(); ++i) {
        if (frozen[i]) continue;
        rate[i] += inc;
        left[active_[i].src] -= inc;
        left[n + active_[i].dst] -= inc;
      }
      for (std::size_t i = 0; i < active_.size(); ++i) {
        if (!frozen[i] && (full[active_[i].src] || full[n + active_[i].dst])) frozen[i] = true, --unfrozen;
      }
    }
    for (std::size_t i = 0; i < active_.size(); ++i) {
      Transfer& t = active_[i];
      if (rate[i] == t.bps) continue;
      if (now > t.since) t.bits_left = std::max(0.0, t.bits_left - t.bps * static_cast<double>(now - t.since) / 1e9);
      t.since = std::max(t.since, now);
      t.bps = rate[i];
      t.done = t.bits_left <= 0 ? t.since
               : t.bps > 0      ? t.since + static_cast<Nanos>(std::ceil(t.bits_left * 1e9 / t.bps))
                                : std::numeric_limits<Nanos>::max();
    }
  }

  RankLinks links_;
  std::vector<Transfer> active_;
  bool pending_ = false;  // active_ changed at pending_at_ since the last sharing
  Nanos pending_at_ = 0;
  Nanos next_done_ = std::numeric_limits<Nanos>::max();
};

// Each rank runs on its slice of the profile (its ops and the messages to it), as
// an agent does: an Executor keeps state per op of its profile, and on the whole
// profile every rank would hold all of it (a 256-rank ring has half a million ops:
// gigabytes). Ops cross between ranks by their whole-profile index.
struct RankSlices {
  std::vector<ProfileSlice> slices;  // empty: one rank, which runs on the whole
  std::vector<OpIndex> at_sender;    // by whole-profile op: a send's index in its sender's slice
  std::vector<OpIndex> at_receiver;  // ... and in its receiver's

  explicit RankSlices(const Profile& p) {
    if (p.ranks.size() <= 1) return;
    std::vector<SliceParts> parts = slice_parts(p);
    at_sender.assign(p.ops.size(), 0);
    at_receiver.assign(p.ops.size(), 0);
    slices.reserve(p.ranks.size());
    for (std::size_t r = 0; r < p.ranks.size(); ++r) {
      // Without the rank list: an Executor never reads it, and every rank's
      // copy would make ranks x ranks entries.
      slices.push_back(slice_profile(p, static_cast<RankId>(r), std::move(parts[r]), SliceRanks::none));
      const std::vector<OpIndex>& global = slices.back().global;
      for (std::size_t i = 0; i < global.size(); ++i) {
        const Op& op = p.ops[global[i]];
        if (op.type != OpType::send) continue;
        if (p.flows[op.flow].src == r) at_sender[global[i]] = static_cast<OpIndex>(i);
        if (p.flows[op.flow].dst == r) at_receiver[global[i]] = static_cast<OpIndex>(i);
      }
    }
  }
  const Profile& profile(const Profile& whole, std::size_t r) const { return slices.empty() ? whole : slices[r].profile; }
  OpIndex global(std::size_t r, OpIndex local) const { return slices.empty() ? local : slices[r].global[local]; }
  OpIndex sender(OpIndex op) const { return slices.empty() ? op : at_sender[op]; }
  OpIndex receiver(OpIndex op) const { return slices.empty() ? op : at_receiver[op]; }
};

}  // namespace

SimResult simulate(const Profile& p, const SimOptions& o) {
  const std::size_t n = p.ranks.size();
  if (!o.links.empty() && o.links.size() != n) {
    throw std::invalid_argument("simulation: " + std::to_string(o.links.size()) + " links for " + std::to_string(n) + " ranks");
  }
  if (!o.executor.offsets.empty() && o.executor.offsets.size() != p.ops.size()) {
    throw std::invalid_argument("simulation: " + std::to_string(o.executor.offsets.size()) + " open-loop offsets for " +
                                std::to_string(p.ops.size()) + " ops");
  }
  const RankSlices sliced(p);
  std::vector<Executor> ranks;
  ranks.reserve(n);
  for (std::size_t r = 0; r < n; ++r) {
    ExecutorOptions eo = o.executor;
    if (!o.slowdown.empty()) eo.slowdown = o.slowdown.at(r);
    if (!sliced.slices.empty() && !eo.offsets.empty()) {
      eo.offsets.clear();
      for (const OpIndex g : sliced.slices[r].global) eo.offsets.push_back(o.executor.offsets[g]);
    }
    ranks.emplace_back(sliced.profile(p, r), static_cast<RankId>(r), eo);
  }
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::uint64_t seq = 0;
  Network net(o.links.empty() ? uniform_links(n, o.link_bps) : o.links);
  std::vector<Nanos> wake_pending(n, -1);
  SimResult result;
  result.rank_iterations.resize(n);

  const auto drain = [&](RankId r, Nanos now) {
    Executor& ex = ranks[r];
    Action a;
    while (ex.next_action(a)) {
      const OpIndex g = sliced.global(r, a.op);
      const Op& op = p.ops[g];
      const Nanos start = std::max(now, a.at);
      if (a.kind == Action::Kind::compute) {
        result.ops.push_back({g, a.iteration, a.at, start, start + a.duration, -1});
        events.push({start + a.duration, seq++, Event::Kind::compute_done, r, a.op, a.iteration});
      } else {
        const RankId dst = p.flows[op.flow].dst;
        result.ops.push_back({g, a.iteration, a.at, start, -1, -1});
        net.start({g, a.iteration, r, dst, result.ops.size() - 1, static_cast<double>(op.bytes) * 8.0, start, 0, 0}, now);
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
  while (!events.empty() || !net.empty()) {
    if (!net.empty() && (events.empty() || net.next_done() <= events.top().at)) {
      const Nanos now = net.next_done();
      if (now == std::numeric_limits<Nanos>::max()) break;  // a link of rate 0: stalled, reported below
      for (const Network::Transfer& t : net.finish(now)) {
        result.ops[t.entry].end = now;
        result.ops[t.entry].received = now + o.latency;
        events.push({now, seq++, Event::Kind::send_done, t.src, sliced.sender(t.op), t.iteration});
        // Handed to the receiver when its reader comes for it (the flow's read lag).
        const Nanos lag = p.flows[p.ops[t.op].flow].read_lag;
        events.push({now + o.latency + lag, seq++, Event::Kind::received, t.dst, sliced.receiver(t.op), t.iteration});
      }
      continue;
    }
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

Timeline timeline_from_simulation(const Profile& p, const SimResult& sim, std::string source) {
  Timeline t;
  t.source = std::move(source);
  const std::size_t n = sim.iteration_end.size();
  t.iterations = n;
  std::vector<Nanos> start(n, std::numeric_limits<Nanos>::max()), end(n, 0);
  t.rank_iteration.assign(p.ranks.size(), std::vector<Nanos>(n, -1));
  for (std::size_t r = 0; r < sim.rank_iterations.size() && r < p.ranks.size(); ++r) {
    for (const auto& it : sim.rank_iterations[r]) {
      if (it.iteration >= n) continue;
      start[it.iteration] = std::min(start[it.iteration], it.start);
      end[it.iteration] = std::max(end[it.iteration], it.end);
      t.rank_iteration[r][it.iteration] = it.end - it.start;
    }
  }
  t.iteration.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (start[i] != std::numeric_limits<Nanos>::max()) t.iteration[i] = end[i] - start[i];
  }
  t.ops.assign(p.ops.size(), std::vector<Instance>(n));
  t.flow_bytes.assign(p.flows.size(), 0);
  t.flow_busy.assign(p.flows.size(), 0);
  // A flow is busy from a message's ready to its arrival; the simulator keeps a
  // flow's messages in order, so its busy spans never overlap but may touch.
  std::vector<Nanos> busy_until(p.flows.size(), -1);
  for (const SimOpTiming& x : sim.ops) {
    if (x.op >= p.ops.size() || x.iteration >= n || start[x.iteration] == std::numeric_limits<Nanos>::max()) continue;
    const Op& op = p.ops[x.op];
    const Nanos base = start[x.iteration];
    const bool send = op.type == OpType::send;
    // A message ends when its rank has it, as in a replay's records and the
    // job's reads: its arrival plus its flow's read lag.
    const Nanos handed = send ? x.received + p.flows[op.flow].read_lag : x.end;
    t.ops[x.op][x.iteration] = {x.start - base, handed - base, send ? x.end - base : -1};
    if (!send) continue;
    t.flow_bytes[op.flow] += op.bytes;
    const Nanos from = std::max(x.start, busy_until[op.flow]);
    if (x.received > from) t.flow_busy[op.flow] += x.received - from;
    busy_until[op.flow] = std::max(busy_until[op.flow], x.received);
  }
  return t;
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

#include "tensorwire/analysis/graph_sim.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <tuple>

#include "tensorwire/util/heap.hpp"

namespace tw {

std::vector<Nanos> GraphSimRun::iteration_times() const {
  std::vector<Nanos> out;
  out.reserve(iteration_end.size());
  Nanos prev = 0;
  for (Nanos e : iteration_end) {
    out.push_back(e - prev);
    prev = e;
  }
  return out;
}

double GraphSimRun::mean_iteration(std::size_t from) const {
  const std::vector<Nanos> t = iteration_times();
  if (t.empty()) return 0;
  if (from >= t.size()) from = 0;
  return std::accumulate(t.begin() + static_cast<std::ptrdiff_t>(from), t.end(), 0.0) /
         static_cast<double>(t.size() - from);
}

namespace {

constexpr Nanos kNever = std::numeric_limits<Nanos>::max();
constexpr std::uint32_t kUnarmed = std::numeric_limits<std::uint32_t>::max();  // above any instance (instances < iterations <= 2^32 - 1)
constexpr std::uint32_t kMostBack = std::numeric_limits<std::uint32_t>::max() >> 1;  // fits Successor::back_recv

enum class Kind : std::uint8_t { compute_done, send_done, received, sent_and_received, wake_compute, wake_flow, transfer_begin, net_done };

struct Event {
  Nanos at;
  std::uint64_t seq;
  std::uint32_t id;  // op, rank, flow or transfer slot
  std::uint32_t iteration;  // net_done: the slot's version
  Kind kind;
};
// The pending events, earliest first (ties: first scheduled first). A 4-ary heap
// of one 128-bit key per event (time, then sequence number) beside the event
// itself: one compare per child, and half the levels of a binary heap; the
// simulator spends most of its time here.
class EventQueue {
 public:
  bool empty() const { return keys_.empty(); }
  const Event& top() const { return events_[0]; }
  void push(const Event& e) {
    std::size_t i = keys_.size();
    keys_.push_back(key(e));
    events_.push_back(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (keys_[parent] <= keys_[i]) break;
      std::swap(keys_[parent], keys_[i]);
      std::swap(events_[parent], events_[i]);
      i = parent;
    }
  }
  void pop() {
    const std::size_t n = keys_.size() - 1;
    keys_[0] = keys_[n];
    events_[0] = events_[n];
    keys_.pop_back();
    events_.pop_back();
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t last = std::min(first + 4, n);
      for (std::size_t c = first + 1; c < last; ++c) best = keys_[c] < keys_[best] ? c : best;
      if (keys_[i] <= keys_[best]) break;
      std::swap(keys_[i], keys_[best]);
      std::swap(events_[i], events_[best]);
      i = best;
    }
  }

 private:
  __extension__ using Key = unsigned __int128;
  static Key key(const Event& e) {
    // Times are >= 0 in a simulation; the sign bit flipped keeps the order if not.
    return (static_cast<Key>(static_cast<std::uint64_t>(e.at) ^ (std::uint64_t{1} << 63)) << 64) | e.seq;
  }
  std::vector<Key> keys_;
  std::vector<Event> events_;
};

struct Queued {
  Nanos at;
  OpIndex op;
  std::uint32_t iteration;
};
struct QueuedLater {
  bool operator()(const Queued& a, const Queued& b) const { return a.at != b.at ? a.at > b.at : a.op > b.op; }
};
using OpQueue = std::priority_queue<Queued, std::vector<Queued>, QueuedLater>;
// Sends whose planned start has come: the lowest priority first, then as QueuedLater.
struct Due {
  std::uint32_t priority;
  Queued q;
};
struct DueLater {
  bool operator()(const Due& a, const Due& b) const { return a.priority != b.priority ? a.priority > b.priority : QueuedLater{}(a.q, b.q); }
};
using DueQueue = std::priority_queue<Due, std::vector<Due>, DueLater>;

// 8 bytes: one per dependency of a graph of tens of millions of ops.
struct Successor {
  OpIndex op;
  std::uint32_t back_recv;  // iterations back << 1 | waits for the receipt
  std::uint32_t back() const { return back_recv >> 1; }
  bool recv() const { return (back_recv & 1) != 0; }
};

Nanos bits_time(double bits, double bps) {
  // Clamped below the largest Nanos: a tiny rate must not overflow the cast.
  return bits <= 0 ? 0 : static_cast<Nanos>(std::min(std::ceil(bits * 1e9 / bps), 4e18));
}

class Engine {
 public:
  Engine(const SimGraph& g, const GraphSimOptions& o) : g_(g), o_(o) {
    iterations_ = o.iterations != 0 ? o.iterations : g.iterations;
    if (iterations_ == 0 || iterations_ > std::numeric_limits<std::uint32_t>::max()) {
      throw std::invalid_argument("simulation: the number of iterations must be from 1 to 2^32 - 1");
    }
    const std::size_t n = g.ops.size();
    const std::size_t f = g.flows.size();
    if (g.flow_src.size() != f || g.flow_dst.size() != f) throw std::invalid_argument("simulation: flow ends and models differ in number");
    if (!g.rank_links.empty() && g.rank_links.size() != g.ranks) throw std::invalid_argument("simulation: rank links for another number of ranks");
    for (const FlowModel& m : g.flows) {
      if (!(m.bps > 0) || m.path_bps < 0 || m.per_message < 0 || m.latency < 0 || m.read_lag < 0) throw std::invalid_argument("simulation: a flow without a positive rate");
    }
    // Arrays of one entry per op, each filled once: huge pages (a 1024-rank
    // ring has 21 million ops).
    assign_huge(st_, n, OpState{});
    // Successors, as compressed rows: each op's count at [op + 2], then each
    // row's start at [op + 1] as it fills, which leaves [op] at its start.
    assign_huge(succ_begin_, n + 2, 0u);
    own_begin_.assign(g.ranks + 1, 0);
    per_iteration_.assign(g.ranks, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const SimGraph::Node& op = g.ops[i];
      if (op.rank >= g.ranks) throw std::invalid_argument("simulation: an op on a rank that does not exist");
      if (op.type == OpType::send && op.flow >= f) throw std::invalid_argument("simulation: a send on a flow that does not exist");
      if (op.type == OpType::send && g.flow_src[op.flow] != op.rank) throw std::invalid_argument("simulation: a send on another rank's flow");
      if (static_cast<std::size_t>(op.dep_begin) + op.dep_count > g.deps.size()) throw std::invalid_argument("simulation: dependencies out of range");
      if (op.type == OpType::compute && op.dur_count == 0) throw std::invalid_argument("simulation: a compute op without a duration");
      if (op.extra != SimGraph::kNoExtra && op.extra >= g.extras.size()) throw std::invalid_argument("simulation: an op's extra out of range");
      for (std::uint32_t k = 0; k < op.dep_count; ++k) {
        const Dependency& d = g.deps[op.dep_begin + k];
        if (d.op >= n) throw std::invalid_argument("simulation: a dependency on an op that does not exist");
        if (d.iterations_back > kMostBack) throw std::invalid_argument("simulation: a dependency too many iterations back");
        if (++succ_begin_[d.op + 2] == 0) throw std::invalid_argument("simulation: over 2^32 dependencies");
      }
      ++own_begin_[op.rank + 1];
      ++per_iteration_[op.rank];
      if (op.type == OpType::send) ++per_iteration_[g.flow_dst[op.flow]];
    }
    std::uint64_t edges = 0;
    for (std::size_t i = 2; i < n + 2; ++i) {
      edges += succ_begin_[i];
      if (edges > std::numeric_limits<std::uint32_t>::max()) throw std::invalid_argument("simulation: over 2^32 dependencies");
      succ_begin_[i] = static_cast<std::uint32_t>(edges);
    }
    assign_huge(succ_, edges, Successor{});
    for (std::size_t i = 0; i < n; ++i) {
      const SimGraph::Node& op = g.ops[i];
      for (std::uint32_t k = 0; k < op.dep_count; ++k) {
        const Dependency& d = g.deps[op.dep_begin + k];
        succ_[succ_begin_[d.op + 1]++] = {static_cast<OpIndex>(i), d.iterations_back << 1 | (d.recv ? 1U : 0U)};
      }
    }
    succ_begin_.pop_back();
    for (std::uint32_t r = 0; r < g.ranks; ++r) own_begin_[r + 1] += own_begin_[r];
    assign_huge(own_, n, OpIndex{0});
    std::vector<std::uint32_t> pos(own_begin_.begin(), own_begin_.end() - 1);
    for (std::size_t i = 0; i < n; ++i) own_[pos[g.ops[i].rank]++] = static_cast<OpIndex>(i);

    ranks_.resize(g.ranks);
    flows_.resize(f);
    run_.iterations = iterations_;
    run_.iteration_end.assign(iterations_, 0);
    run_.rank_iteration_end.assign(g.ranks, std::vector<Nanos>(iterations_, -1));
    if (o.record) assign_huge(run_.instances, n * iterations_, SimInstance{});
    if (!g.rank_links.empty()) {
      rank_active_.resize(2 * static_cast<std::size_t>(g.ranks));
      link_mark_.assign(2 * static_cast<std::size_t>(g.ranks), 0);
      link_pos_.assign(2 * static_cast<std::size_t>(g.ranks), 0);
      link_pending_.assign(2 * static_cast<std::size_t>(g.ranks), 0);
    }
  }

  GraphSimRun run() {
    for (std::uint32_t r = 0; r < g_.ranks; ++r) {
      if (per_iteration_[r] == 0) {
        ranks_[r].completed = iterations_;
        for (std::uint64_t i = 0; i < iterations_; ++i) run_.rank_iteration_end[r][i] = 0;
        continue;
      }
      if (g_.barrier) {
        enter(r, 0, 0);
      } else {
        for (std::uint32_t k = own_begin_[r]; k < own_begin_[r + 1]; ++k) arm(own_[k], 0, 0);
      }
    }
    for (;;) {
      // The messages that started or ended at this instant are shared out once
      // all of them are in: N messages starting together cost one sharing, not N.
      if ((!pending_.empty() || !lone_.empty()) && (events_.empty() || events_.top().at > now_)) reshare();
      if (events_.empty()) break;
      const Event e = events_.top();
      events_.pop();
      ++run_.events;
      now_ = e.at;
      switch (e.kind) {
        case Kind::compute_done: {
          RankState& rs = ranks_[g_.ops[e.id].rank];
          rs.computing = false;
          rs.free_since = now_;
          completed(e.id, e.iteration, false);
          dispatch_compute(g_.ops[e.id].rank);
          break;
        }
        case Kind::send_done:
        case Kind::sent_and_received: {
          const FlowIndex fl = g_.ops[e.id].flow;
          flows_[fl].busy = false;
          flows_[fl].free_since = now_;
          completed(e.id, e.iteration, false);
          dispatch_flow(fl);
          if (e.kind == Kind::sent_and_received) completed(e.id, e.iteration, true);
          break;
        }
        case Kind::received: completed(e.id, e.iteration, true); break;
        case Kind::wake_compute:
          if (ranks_[e.id].wake == e.at) ranks_[e.id].wake = kNever;
          dispatch_compute(e.id);
          break;
        case Kind::wake_flow:
          if (flows_[e.id].wake == e.at) flows_[e.id].wake = kNever;
          dispatch_flow(e.id);
          break;
        case Kind::transfer_begin: begin_shared(e.id, e.iteration); break;
        case Kind::net_done:
          if (e.id < slots_.size() && slots_[e.id].active && slots_[e.id].version == e.iteration) end_shared(e.id);
          break;
      }
    }
    for (std::uint32_t r = 0; r < g_.ranks; ++r) {
      if (ranks_[r].completed < iterations_) throw std::runtime_error("simulation stalled: rank " + std::to_string(r) + " " + waiting(r));
    }
    for (std::uint32_t r = 0; r < g_.ranks; ++r) {
      for (std::uint64_t i = 0; i < iterations_; ++i) run_.iteration_end[i] = std::max(run_.iteration_end[i], run_.rank_iteration_end[r][i]);
    }
    run_.makespan = iterations_ == 0 ? 0 : *std::max_element(run_.iteration_end.begin(), run_.iteration_end.end());
    return std::move(run_);
  }

 private:
  struct RankState {
    OpQueue queue;
    bool computing = false;
    Nanos free_since = 0;
    Nanos wake = kNever;
    OpIndex last_op = 0;
    std::uint32_t last_it = 0;
    bool has_last = false;
    std::uint64_t completed = 0;  // iterations
    std::uint64_t first_tracked = 0;
    std::deque<std::uint32_t> tracked;  // items done per iteration from first_tracked
  };
  struct FlowState {
    OpQueue queue;  // waiting for their planned start
    DueQueue due;
    bool busy = false;
    Nanos free_since = 0;
    Nanos path_free = 0;
    Nanos wake = kNever;
    OpIndex last_op = 0;
    std::uint32_t last_it = 0;
    bool has_last = false;
  };
  struct Slot {
    OpIndex op = 0;
    std::uint32_t iteration = 0;
    FlowIndex flow = 0;
    double bits_left = 0;
    Nanos since = 0;
    double bps = 0;
    std::uint32_t version = 0;
    std::uint32_t at_src = 0, at_dst = 0;  // its places in rank_active_ of its two links
    bool active = false;
    bool due = false;  // a completion event of its current rate is pending
  };

  SimInstance* rec(OpIndex op, std::uint32_t it) { return o_.record ? &run_.instances[op * iterations_ + it] : nullptr; }

  void push(Nanos at, Kind k, std::uint32_t id, std::uint32_t it) { events_.push({at, seq_++, id, it, k}); }

  void enter(RankId r, std::uint32_t it, Nanos now) {
    for (std::uint32_t k = own_begin_[r]; k < own_begin_[r + 1]; ++k) arm(own_[k], it, now);
  }

  void arm(OpIndex op, std::uint32_t it, Nanos now) {
    st_[op].armed = it;
    const SimGraph::Node& n = g_.ops[op];
    std::uint32_t missing = 0;
    for (std::uint32_t k = 0; k < n.dep_count; ++k) {
      const Dependency& d = g_.deps[n.dep_begin + k];
      const std::int64_t need = static_cast<std::int64_t>(it) - d.iterations_back;
      const std::uint32_t have = d.recv ? st_[d.op].recv : st_[d.op].done;
      if (need >= 0 && have <= static_cast<std::uint64_t>(need)) ++missing;
    }
    st_[op].missing = missing;
    if (missing == 0) ready(op, it, now);
  }

  void ready(OpIndex op, std::uint32_t it, Nanos now) {
    const SimGraph::Node& n = g_.ops[op];
    if (SimInstance* x = rec(op, it)) {
      x->ready = now;
      x->has_cause = has_cause_;
      x->cause_op = cause_op_, x->cause_iteration = cause_it_, x->cause_recv = cause_recv_;
      if (n.type == OpType::compute) {
        const RankState& rs = ranks_[n.rank];
        x->idle_from = rs.computing ? -1 : rs.free_since;
      } else {
        const FlowState& fs = flows_[n.flow];
        x->idle_from = fs.busy ? -1 : fs.free_since;
      }
    }
    const Queued q{now + g_.gap(op, it), op, it};
    if (n.type == OpType::compute) {
      ranks_[n.rank].queue.push(q);
      dispatch_compute(n.rank);
    } else {
      // Due at once (no gap): straight among the due, where dispatch_flow would
      // move it (the due leave in one order whatever the way in), and one heap
      // of the flow's thousands of waiting sends fewer.
      FlowState& fs = flows_[n.flow];
      if (q.at <= now_) fs.due.push({n.priority, q});
      else fs.queue.push(q);
      dispatch_flow(n.flow);
    }
  }

  void dispatch_compute(RankId r) {
    RankState& rs = ranks_[r];
    if (rs.computing || rs.queue.empty()) return;
    const Queued q = rs.queue.top();
    if (q.at > now_) {
      if (rs.wake > q.at) rs.wake = q.at, push(q.at, Kind::wake_compute, r, 0);
      return;
    }
    rs.queue.pop();
    rs.computing = true;
    const Nanos d = std::max<Nanos>(0, g_.duration(q.op, q.iteration));
    const Nanos start = now_ + std::max<Nanos>(0, g_.lag(q.op, q.iteration));
    if (SimInstance* x = rec(q.op, q.iteration)) {
      x->dispatched = now_, x->start = start, x->end = start + d;
      if (q.at < now_ && rs.has_last) x->held = true, x->held_op = rs.last_op, x->held_iteration = rs.last_it;
    }
    rs.last_op = q.op, rs.last_it = q.iteration, rs.has_last = true;
    push(start + d, Kind::compute_done, q.op, q.iteration);
  }

  void dispatch_flow(FlowIndex f) {
    FlowState& fs = flows_[f];
    if (fs.busy) return;
    while (!fs.queue.empty() && fs.queue.top().at <= now_) {
      fs.due.push({g_.ops[fs.queue.top().op].priority, fs.queue.top()});
      fs.queue.pop();
    }
    if (fs.due.empty()) {
      if (!fs.queue.empty() && fs.wake > fs.queue.top().at) fs.wake = fs.queue.top().at, push(fs.wake, Kind::wake_flow, f, 0);
      return;
    }
    const Queued q = fs.due.top().q;
    fs.due.pop();
    fs.busy = true;
    const FlowModel& m = g_.flows[f];
    const Nanos start = now_ + std::max<Nanos>(0, g_.lag(q.op, q.iteration));
    if (SimInstance* x = rec(q.op, q.iteration)) {
      x->dispatched = now_, x->start = start;
      if (q.at < now_ && fs.has_last) x->held = true, x->held_op = fs.last_op, x->held_iteration = fs.last_it;
    }
    fs.last_op = q.op, fs.last_it = q.iteration, fs.has_last = true;
    const SimGraph::Node& n = g_.ops[q.op];
    const SimGraph::NodeExtra& x = g_.extra(q.op);
    const double bits = static_cast<double>(n.bytes) * 8.0;
    if (x.hold_count > 0) {
      sent(q.op, q.iteration, start + x.prep + std::max<Nanos>(0, SimGraph::cyclic(g_.holds, x.hold_begin, x.hold_count, q.iteration)));
    } else if (g_.rank_links.empty()) {
      const Nanos end = start + m.per_message + x.prep + bits_time(bits, m.bps);
      sent(q.op, q.iteration, end);
    } else {
      push(start + m.per_message + x.prep, Kind::transfer_begin, q.op, q.iteration);
    }
  }

  // The message's last bit left at `end`.
  void sent(OpIndex op, std::uint32_t it, Nanos end) {
    const FlowIndex f = g_.ops[op].flow;
    const FlowModel& m = g_.flows[f];
    const SimGraph::NodeExtra& x = g_.extra(op);
    Nanos arrival = end + m.latency;
    if (x.path_count > 0) {
      arrival = std::max(end, flows_[f].path_free) + std::max<Nanos>(0, SimGraph::cyclic(g_.paths, x.path_begin, x.path_count, it));
      flows_[f].path_free = arrival;
    } else if (m.path_bps > 0) {
      arrival = std::max(arrival, flows_[f].path_free + bits_time(static_cast<double>(g_.ops[op].bytes) * 8.0, m.path_bps));
      flows_[f].path_free = arrival;
    }
    const Nanos handed = arrival + m.read_lag + x.post;
    if (SimInstance* r = rec(op, it)) r->end = end, r->received = handed;
    if (handed == end) {
      push(end, Kind::sent_and_received, op, it);  // one event for both: half the heap's work on a fast path
    } else {
      push(end, Kind::send_done, op, it);
      push(handed, Kind::received, op, it);
    }
  }

  void completed(OpIndex op, std::uint32_t it, bool recv) {
    std::uint32_t& count = recv ? st_[op].recv : st_[op].done;
    if (count != it) throw std::logic_error("simulation: op instances completed out of order");
    count = it + 1;
    has_cause_ = true, cause_op_ = op, cause_it_ = it, cause_recv_ = recv;
    for (std::uint32_t k = succ_begin_[op]; k < succ_begin_[op + 1]; ++k) {
      const Successor& s = succ_[k];
      if (s.recv() != recv) continue;
      OpState& t = st_[s.op];
      // armed is kUnarmed, above any instance, until the op is armed.
      if (t.armed == static_cast<std::uint64_t>(it) + s.back() && t.missing > 0 && --t.missing == 0) {
        ready(s.op, t.armed, now_);
      }
    }
    const SimGraph::Node& n = g_.ops[op];
    const RankId r = recv ? g_.flow_dst[n.flow] : n.rank;
    if (!recv && !g_.barrier && it + 1 < iterations_) arm(op, it + 1, now_);
    reached(r, it);
  }

  void reached(RankId r, std::uint32_t it) {
    RankState& rs = ranks_[r];
    if (it < rs.first_tracked) throw std::logic_error("simulation: an event for a completed iteration");
    const std::uint64_t k = it - rs.first_tracked;
    while (rs.tracked.size() <= k) rs.tracked.push_back(0);
    ++rs.tracked[k];
    while (!rs.tracked.empty() && rs.tracked.front() == per_iteration_[r]) {
      run_.rank_iteration_end[r][rs.first_tracked] = now_;
      rs.tracked.pop_front();
      ++rs.first_tracked;
      ++rs.completed;
      if (g_.barrier && rs.completed < iterations_) enter(r, static_cast<std::uint32_t>(rs.completed), now_);
    }
  }

  // Shared rank links: max-min fair rates over the messages coupled to the
  // links that changed, by water filling (below). Each group of messages coupled
  // through limited links keeps one completion event pending, its earliest: a
  // message's rate changes only when a message of its group starts or ends, so
  // the others' ends need no event until they are the earliest. N messages
  // sharing a link thus cost O(N) events, not one per message per change (O(N^2)).
  void begin_shared(OpIndex op, std::uint32_t it) {
    std::uint32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& x = slots_[s];
    x.op = op, x.iteration = it, x.flow = g_.ops[op].flow;
    x.bits_left = static_cast<double>(g_.ops[op].bytes) * 8.0;
    x.since = now_, x.bps = 0, x.active = true, x.due = false, ++x.version;
    const RankId src = g_.flow_src[x.flow], dst = g_.flow_dst[x.flow];
    x.at_src = static_cast<std::uint32_t>(rank_active_[src].size());
    rank_active_[src].push_back(s);
    x.at_dst = static_cast<std::uint32_t>(rank_active_[g_.ranks + dst].size());
    rank_active_[g_.ranks + dst].push_back(s);
    changed(src), changed(g_.ranks + dst);
    if (!std::isfinite(capacity(src)) && !std::isfinite(capacity(g_.ranks + dst))) lone_.push_back(s);  // no link to share
  }

  void end_shared(std::uint32_t s) {
    Slot& x = slots_[s];
    x.active = false;
    const RankId src = g_.flow_src[x.flow], dst = g_.flow_dst[x.flow];
    // Out of both links' lists in O(1): the last entry takes its place.
    auto& out = rank_active_[src];
    slots_[out.back()].at_src = x.at_src;
    out[x.at_src] = out.back();
    out.pop_back();
    auto& in = rank_active_[g_.ranks + dst];
    slots_[in.back()].at_dst = x.at_dst;
    in[x.at_dst] = in.back();
    in.pop_back();
    free_.push_back(s);
    sent(x.op, x.iteration, now_);
    changed(src), changed(g_.ranks + dst);
  }

  double capacity(std::size_t link) const {
    const RankLink& l = g_.rank_links[link % g_.ranks];
    const double c = link < g_.ranks ? l.egress_bps : l.ingress_bps;
    return c > 0 ? c : std::numeric_limits<double>::infinity();
  }

  // A limited link whose messages changed. An unlimited one couples nobody: the
  // others on it keep their rates (walking them at every change was O(N) each).
  void changed(std::size_t link) {
    if (!link_pending_[link] && std::isfinite(capacity(link))) link_pending_[link] = 1, pending_.push_back(link);
  }

  // Shares out the links that changed and every link coupled to them.
  void reshare() {
    static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
    ++mark_;
    links_.clear(), members_.clear(), queue_.clear();
    for (std::size_t l : pending_) {
      link_pending_[l] = 0;
      if (link_mark_[l] != mark_) link_mark_[l] = mark_, queue_.push_back(l);
    }
    pending_.clear();
    while (!queue_.empty()) {
      const std::size_t l = queue_.back();
      queue_.pop_back();
      link_pos_[l] = static_cast<std::uint32_t>(links_.size());
      links_.push_back(l);
      for (std::uint32_t s : rank_active_[l]) {
        if (slot_mark(s) == mark_) continue;
        slot_mark(s) = mark_;
        members_.push_back(s);
        const RankId src = g_.flow_src[slots_[s].flow], dst = g_.flow_dst[slots_[s].flow];
        for (std::size_t m : {static_cast<std::size_t>(src), static_cast<std::size_t>(g_.ranks) + dst}) {
          if (link_mark_[m] != mark_ && std::isfinite(capacity(m))) link_mark_[m] = mark_, queue_.push_back(m);
        }
      }
    }
    for (std::uint32_t s : lone_) {  // started on two unlimited links: at its flow's rate
      if (slots_[s].active && slot_mark(s) != mark_) slot_mark(s) = mark_, members_.push_back(s);
    }
    lone_.clear();
    const std::size_t n = members_.size(), nl = links_.size();
    // Each member's two links among links_ (kNone: unlimited, or not reached).
    ends_.resize(n);
    users_.assign(nl, 0);
    fixed_.assign(nl, 0.0);
    on_begin_.assign(nl + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const Slot& x = slots_[members_[i]];
      for (int e = 0; e < 2; ++e) {
        const std::size_t l = e == 0 ? g_.flow_src[x.flow] : g_.ranks + g_.flow_dst[x.flow];
        const bool limited = link_mark_[l] == mark_ && std::isfinite(capacity(l));
        ends_[i][e] = limited ? link_pos_[l] : kNone;
        if (limited) ++users_[ends_[i][e]], ++on_begin_[ends_[i][e] + 1];
      }
    }
    for (std::size_t l = 0; l < nl; ++l) on_begin_[l + 1] += on_begin_[l];
    on_.resize(on_begin_[nl]);
    fill_.assign(on_begin_.begin(), on_begin_.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::uint32_t l : ends_[i]) {
        if (l != kNone) on_[fill_[l]++] = static_cast<std::uint32_t>(i);
      }
    }
    // Water filling: every unfrozen rate rises together (the level); a message
    // freezes when the level reaches its flow's rate, or when one of its links
    // is full (the level where its capacity less its frozen messages' rates is
    // shared equally by the rest). Each step freezes the messages of a full link
    // or the one with the lowest flow rate. The flow rates are a heap, popped only
    // as far as they freeze messages, and a link's level is pushed again once per
    // step that changed it: messages that share one link cost O(N) here.
    const auto cap = [&](std::uint32_t i) { return g_.flows[slots_[members_[i]].flow].bps; };
    const auto higher_cap = [&](std::uint32_t x, std::uint32_t y) { return cap(x) > cap(y); };
    order_.resize(n);
    for (std::size_t i = 0; i < n; ++i) order_[i] = static_cast<std::uint32_t>(i);
    std::make_heap(order_.begin(), order_.end(), higher_cap);
    rate_.assign(n, 0.0);
    frozen_.assign(n, 0);
    full_.assign(nl, 0);
    changed_.assign(nl, 0);
    using Fill = std::tuple<double, std::uint32_t, std::uint32_t>;  // level, link, its users then
    fills_.clear();
    const auto fill_at = [&](std::uint32_t l) {
      fills_.emplace_back((capacity(links_[l]) - fixed_[l]) / users_[l], l, users_[l]);
      std::push_heap(fills_.begin(), fills_.end(), std::greater<>{});
    };
    for (std::uint32_t l = 0; l < nl; ++l) {
      if (users_[l] > 0) fill_at(l);
    }
    double level = 0;
    std::size_t unfrozen = n;
    dirty_.clear();
    const auto freeze = [&](std::uint32_t i, double r) {
      frozen_[i] = 1, rate_[i] = r, --unfrozen;
      for (std::uint32_t l : ends_[i]) {
        if (l == kNone) continue;
        --users_[l], fixed_[l] += r;
        if (!changed_[l]) changed_[l] = 1, dirty_.push_back(l);
      }
    };
    while (unfrozen > 0) {
      while (frozen_[order_.front()]) {  // an unfrozen message is left
        std::pop_heap(order_.begin(), order_.end(), higher_cap);
        order_.pop_back();
      }
      const auto stale = [&](const Fill& f) { return full_[std::get<1>(f)] || users_[std::get<1>(f)] != std::get<2>(f); };
      while (!fills_.empty() && stale(fills_.front())) {
        std::pop_heap(fills_.begin(), fills_.end(), std::greater<>{});
        fills_.pop_back();
      }
      const double flow_level = cap(order_.front());
      if (!fills_.empty() && std::get<0>(fills_.front()) <= flow_level) {
        const auto [at, l, users] = fills_.front();
        std::pop_heap(fills_.begin(), fills_.end(), std::greater<>{});
        fills_.pop_back();
        full_[l] = 1;
        level = std::max(level, at);
        for (std::uint32_t k = on_begin_[l]; k < on_begin_[l + 1]; ++k) {
          if (!frozen_[on_[k]]) freeze(on_[k], std::min(level, cap(on_[k])));
        }
      } else {
        level = std::max(level, flow_level);
        freeze(order_.front(), flow_level);
      }
      for (std::uint32_t l : dirty_) {
        changed_[l] = 0;
        if (users_[l] > 0 && !full_[l]) fill_at(l);
      }
      dirty_.clear();
    }
    // New rates, and one completion event per coupled group: the groups are the
    // sets of members joined through limited links (union-find over links_; a
    // member with none is a group of its own).
    group_.resize(nl + n);
    for (std::size_t k = 0; k < nl + n; ++k) group_[k] = static_cast<std::uint32_t>(k);
    const auto root = [&](std::uint32_t k) {
      while (group_[k] != k) k = group_[k] = group_[group_[k]];
      return k;
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (ends_[i][0] != kNone && ends_[i][1] != kNone) group_[root(ends_[i][0])] = root(ends_[i][1]);
    }
    const auto group_of = [&](std::size_t i) {
      return root(ends_[i][0] != kNone ? ends_[i][0] : ends_[i][1] != kNone ? ends_[i][1] : static_cast<std::uint32_t>(nl + i));
    };
    first_at_.assign(nl + n, kNever);  // per group: its earliest end
    for (std::size_t i = 0; i < n; ++i) {
      Slot& x = slots_[members_[i]];
      if (x.bps != rate_[i]) {
        x.bits_left = std::max(0.0, x.bits_left - x.bps * static_cast<double>(now_ - x.since) / 1e9);
        x.since = now_;
        x.bps = rate_[i];
        ++x.version;  // any event of its old rate is void
        x.due = false;
      }
      if (x.bps <= 0) continue;
      Nanos& first = first_at_[group_of(i)];
      first = std::min(first, x.since + bits_time(x.bits_left, x.bps));
    }
    // The earliest, and any that end at the same instant: equal messages
    // started together end together, in one sharing.
    for (std::size_t i = 0; i < n; ++i) {
      Slot& x = slots_[members_[i]];
      if (x.bps <= 0) continue;
      const Nanos first = first_at_[group_of(i)];
      // One that holds an event of its rate already keeps it: messages on an
      // unlimited link are each a group of their own, and each re-sharing of
      // the link would otherwise push an event for every one of them.
      if (!x.due && x.since + bits_time(x.bits_left, x.bps) == first) {
        x.due = true;
        push(std::max(now_, first), Kind::net_done, members_[i], ++x.version);
      }
    }
  }

  std::uint64_t& slot_mark(std::uint32_t s) {
    if (slot_marks_.size() <= s) slot_marks_.resize(slots_.size(), 0);
    return slot_marks_[s];
  }

  std::string waiting(RankId r) const {
    const std::uint64_t it = ranks_[r].completed;
    for (std::uint32_t k = own_begin_[r]; k < own_begin_[r + 1]; ++k) {
      const OpIndex op = own_[k];
      if (st_[op].done <= it) return "waits in iteration " + std::to_string(it) + " at op " + std::to_string(op);
    }
    return "waits in iteration " + std::to_string(it) + " for a message";
  }

  const SimGraph& g_;
  GraphSimOptions o_;
  std::uint64_t iterations_ = 0;
  // Per op, together, in 16 bytes: the instances done (sender side) and
  // received, the armed instance (kUnarmed: none) and its dependencies not yet met.
  struct OpState {
    std::uint32_t done = 0, recv = 0;
    std::uint32_t armed = kUnarmed;
    std::uint32_t missing = 0;
  };
  std::vector<OpState> st_;
  std::vector<std::uint32_t> succ_begin_;
  std::vector<Successor> succ_;
  std::vector<std::uint32_t> own_begin_;
  std::vector<OpIndex> own_;
  std::vector<std::uint32_t> per_iteration_;
  std::vector<RankState> ranks_;
  std::vector<FlowState> flows_;
  EventQueue events_;
  std::uint64_t seq_ = 0;
  Nanos now_ = 0;
  bool has_cause_ = false;
  OpIndex cause_op_ = 0;
  std::uint32_t cause_it_ = 0;
  bool cause_recv_ = false;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::vector<std::vector<std::uint32_t>> rank_active_;
  std::vector<std::uint64_t> link_mark_;
  std::vector<std::uint32_t> link_pos_;
  std::vector<std::size_t> pending_;  // links whose messages changed at this instant
  std::vector<std::uint8_t> link_pending_;
  std::vector<std::uint32_t> lone_;  // messages started at this instant on two unlimited links
  std::vector<std::uint64_t> slot_marks_;
  // reshare()'s scratch, kept between calls.
  std::vector<std::size_t> links_, queue_;
  std::vector<std::uint32_t> members_, users_, on_begin_, on_, fill_, order_, group_;
  std::vector<std::array<std::uint32_t, 2>> ends_;
  std::vector<double> fixed_, rate_;
  std::vector<std::uint8_t> frozen_, full_, changed_;
  std::vector<std::uint32_t> dirty_;
  std::vector<std::tuple<double, std::uint32_t, std::uint32_t>> fills_;
  std::vector<Nanos> first_at_;
  std::uint64_t mark_ = 0;
  GraphSimRun run_;
};

}  // namespace

std::size_t what_if_bytes(const SimGraph& g) {
  // The engine: per op its state, successor row, place in its rank's list
  // and queue entry (about 48 bytes), a successor per dependency, and per rank
  // its queues and iteration ends (about 1 KiB, and 8 bytes an iteration), per
  // flow its queues.
  const std::size_t tables = g.durations.size() + g.gaps.size() + g.lags.size() + g.holds.size() + g.paths.size();
  const std::size_t iterations = static_cast<std::size_t>(std::min<std::uint64_t>(g.iterations, std::uint64_t{1} << 32));
  return g.ops.size() * (sizeof(SimGraph::Node) + 48) + g.deps.size() * (sizeof(Dependency) + sizeof(std::uint64_t)) +
         tables * sizeof(Nanos) + g.extras.size() * sizeof(SimGraph::NodeExtra) +
         static_cast<std::size_t>(g.ranks) * (1024 + 8 * iterations) + g.flows.size() * 256;
}

GraphSimRun simulate_graph(const SimGraph& graph, const GraphSimOptions& options) {
  Engine e(graph, options);
  return e.run();
}

}  // namespace tw

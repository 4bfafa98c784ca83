// What one rank does and when: the dependency tracking and scheduling rules of
// docs/profile-format.md ("Execution"), without any I/O or clock of its own.
//
// The agent feeds it events (a compute op ended, a message was handed to the
// kernel, a message arrived) with the time they happened; it answers with actions
// (start this compute op, send this message) and the time each should start. All
// times are nanoseconds on one monotonic clock chosen by the caller, so unit
// tests drive it with a fake clock. Not thread-safe: one thread calls it.
//
// Closed loop (default): an op of iteration i is ready when its dependencies have
// completed; it starts `gap` later, but a compute op waits for the rank's
// previous compute op and a send for the previous message on its flow; of the
// sends whose time has come on a flow, the lowest `priority` goes first. Open loop:
// every send of iteration i is planned at start + i x period + its offset, compute
// and dependencies ignored; sends on a flow still go one after another.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <queue>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

struct ExecutorOptions {
  double slowdown = 1.0;  // compute durations are multiplied by this
  std::uint64_t iterations = 0;  // 0: the profile's
  bool open_loop = false;
  // Open loop: per op (indexed like profile.ops), its start offset within an
  // iteration, and the iteration period.
  std::vector<Nanos> offsets;
  Nanos period = 0;
};

// How early, at most, an agent that does not spin sets a timer: its running
// estimate of the timer's wake-up delay (replayer/agent WakeDelay). Work planned
// for that time then starts up to this much before it.
inline constexpr Nanos kMaxTimerLead = 200 * kMicro;

struct Action {
  enum class Kind : std::uint8_t { compute, send };
  Kind kind = Kind::compute;
  OpIndex op = 0;
  std::uint32_t iteration = 0;
  Nanos at = 0;  // planned start
  Nanos duration = 0;  // compute: how long to hold the rank (slowdown applied)
};

class Executor {
 public:
  // `profile` must outlive the executor and be valid (as loaded).
  Executor(const Profile& profile, RankId rank, ExecutorOptions options);

  // Begins iteration 0 at `now`.
  void start(Nanos now);

  // Events, each at the time it happened. The agent reports every action it was
  // given exactly once, in any order consistent with time.
  void compute_done(OpIndex op, std::uint32_t iteration, Nanos now);
  void send_done(OpIndex op, std::uint32_t iteration, Nanos now);
  // A message addressed to this rank arrived (its last byte, plus any emulated delay).
  void received(OpIndex op, std::uint32_t iteration, Nanos now);

  // The time has come for work planned earlier (see next_wake).
  void tick(Nanos now);

  // The next action to carry out now, if any: call until it returns false after
  // start(), tick() and every event. An action's `at` is its planned start; it is
  // handed out once that time has come (at <= the time of the call that made it).
  bool next_action(Action& out);

  // When the executor next needs a tick(): the planned start of the earliest op
  // that waits only for its time to come; nullopt if none does.
  std::optional<Nanos> next_wake() const;

  // All iterations done: every own op completed, every incoming message received.
  bool finished() const { return completed_iterations_ == iterations_; }
  std::uint64_t iterations() const { return iterations_; }
  std::uint64_t completed_iterations() const { return completed_iterations_; }

  // Per-iteration times of this rank: when it entered the iteration and when the
  // iteration completed. Valid for completed iterations; the agent reads and may
  // forget them as they complete (pop_completed).
  struct IterationTimes {
    std::uint32_t iteration;
    Nanos start;
    Nanos end;
  };
  bool pop_completed(IterationTimes& out);

  // Whether an op of this rank waits now for a message of `flow` (an incoming
  // flow): an op armed for its next instance that still misses a dependency on
  // the flow's messages, or, with the iteration barrier, an iteration whose own
  // ops are all done and that waits only for messages (the next one begins when
  // they are in). A flow nobody waits for can gather its reads (--read-gap-us);
  // one that is waited for reads at once. Conservative: an op that waits on
  // several things counts for each of its incoming flows until it is ready.
  bool awaited(FlowIndex flow) const {
    return waiters_[flow] > 0 || (barrier_ && (tracked_.empty() ? own_.empty() : tracked_.front().own == own_.size()));
  }
  // Changes whenever awaited() may have changed, for a caller that copies it
  // to another thread.
  std::uint64_t awaited_version() const { return awaited_version_; }

  // A human-readable account of what is not yet done, for timeouts.
  std::string waiting_for() const;

 private:
  struct Successor {
    OpIndex op;
    std::uint32_t back;
  };
  struct Queued {
    Nanos at;
    OpIndex op;
    std::uint32_t iteration;
    bool operator>(const Queued& o) const { return at != o.at ? at > o.at : op > o.op; }
  };
  using MinHeap = std::priority_queue<Queued, std::vector<Queued>, std::greater<Queued>>;
  // Sends whose planned start has come, most urgent on top.
  struct Due {
    std::uint32_t priority;
    Queued q;
    bool operator>(const Due& o) const { return priority != o.priority ? priority > o.priority : q > o.q; }
  };
  using DueHeap = std::priority_queue<Due, std::vector<Due>, std::greater<Due>>;

  void counted(OpIndex op, std::uint32_t iteration, Nanos now);
  void arm(OpIndex op, std::uint32_t iteration, Nanos now);
  void ready(OpIndex op, std::uint32_t iteration, Nanos now);
  void enter_iteration(std::uint32_t iteration, Nanos now);
  void plan_open_loop_iteration(std::uint32_t iteration);
  void dispatch_compute(Nanos now);
  void dispatch_flow(FlowIndex flow, Nanos now);
  void reached(std::uint32_t iteration, bool own, Nanos now);
  void track_until(std::uint64_t k);
  void set_waiting(OpIndex op, bool waiting);

  const Profile& p_;
  RankId rank_;
  ExecutorOptions o_;
  std::uint64_t iterations_;

  std::vector<OpIndex> own_;  // this rank's ops
  std::vector<bool> is_own_;
  std::vector<bool> is_incoming_;
  std::vector<FlowIndex> own_flows_;
  std::vector<std::vector<Successor>> succ_;  // own ops that depend on op (any rank)
  std::vector<std::uint64_t> count_;  // own ops: instances completed; incoming: instances received
  std::vector<std::int64_t> armed_iter_;  // own ops: armed instance, -1 if none
  std::vector<std::uint32_t> missing_;  // own ops: unsatisfied deps of the armed instance
  std::vector<std::vector<FlowIndex>> waits_on_;  // own ops: the incoming flows of their dependencies
  std::vector<bool> waiting_;  // own ops: armed with missing_ > 0
  std::vector<std::uint32_t> waiters_;  // by flow: own ops waiting that depend on its messages
  std::uint64_t awaited_version_ = 0;

  MinHeap compute_queue_;
  bool computing_ = false;
  std::vector<MinHeap> flow_queue_;  // by flow index (only own flows used): sends waiting for their time
  std::vector<DueHeap> flow_due_;  // by flow index: sends whose time has come
  std::vector<bool> flow_busy_;
  std::vector<Action> actions_;  // a FIFO that keeps its capacity
  std::size_t action_head_ = 0;

  // Iteration bookkeeping: tracked_ holds, per iteration from first_tracked_,
  // what the rank has done of it.
  std::uint64_t per_iteration_total_ = 0;
  struct Tracked {
    std::uint64_t count = 0;  // own ops completed and incoming messages received
    std::uint64_t own = 0;    // own ops completed
    Nanos start = -1;         // when the rank entered it; -1 not yet
  };
  std::deque<Tracked> tracked_;
  // The iteration barrier is kept (closed loop): awaited() then also depends on
  // the oldest tracked iteration.
  bool barrier_ = false;
  std::uint64_t first_tracked_ = 0;
  std::uint64_t completed_iterations_ = 0;
  std::deque<IterationTimes> completed_;
  Nanos start_ = 0;
  std::uint64_t open_loop_planned_ = 0;  // open loop: iterations whose sends are queued
  std::uint64_t open_loop_pending_ = 0;  // open loop: sends of the latest planned iteration not yet started
};

}  // namespace tw

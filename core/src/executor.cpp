#include "tensorwire/core/executor.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tw {

Executor::Executor(const Profile& profile, RankId rank, ExecutorOptions options)
    : p_(profile), rank_(rank), o_(std::move(options)) {
  iterations_ = o_.iterations != 0 ? o_.iterations : p_.iterations;
  barrier_ = p_.iteration_barrier && !o_.open_loop;
  const std::size_t n = p_.ops.size();
  if (o_.open_loop && o_.offsets.size() != n) throw std::invalid_argument("open loop needs one offset per op");
  is_own_.assign(n, false);
  is_incoming_.assign(n, false);
  succ_.assign(n, {});
  count_.assign(n, 0);
  armed_iter_.assign(n, -1);
  missing_.assign(n, 0);
  waits_on_.assign(n, {});
  waiting_.assign(n, false);
  waiters_.assign(p_.flows.size(), 0);
  flow_queue_.resize(p_.flows.size());
  flow_due_.resize(p_.flows.size());
  flow_busy_.assign(p_.flows.size(), false);
  std::vector<bool> flow_seen(p_.flows.size(), false);
  std::size_t incoming = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = p_.ops[i];
    if (op.type == OpType::send && p_.flows[op.flow].dst == rank_) {
      is_incoming_[i] = true;
      ++incoming;
    }
    if (op.rank != rank_) continue;
    if (o_.open_loop && op.type == OpType::compute) continue;  // open loop replays sends only
    is_own_[i] = true;
    own_.push_back(static_cast<OpIndex>(i));
    if (op.type == OpType::send && !flow_seen[op.flow]) {
      flow_seen[op.flow] = true;
      own_flows_.push_back(op.flow);
    }
    if (!o_.open_loop) {
      for (const Dependency& d : op.after) {
        succ_[d.op].push_back({static_cast<OpIndex>(i), d.iterations_back});
        const Op& dep = p_.ops[d.op];
        if (dep.type != OpType::send || p_.flows[dep.flow].dst != rank_) continue;
        auto& w = waits_on_[i];
        if (std::find(w.begin(), w.end(), dep.flow) == w.end()) w.push_back(dep.flow);
      }
    }
  }
  per_iteration_total_ = own_.size() + incoming;
  actions_.reserve(64);
}

void Executor::start(Nanos now) {
  start_ = now;
  if (per_iteration_total_ == 0) {
    // A rank with nothing to do: every iteration is empty.
    for (std::uint64_t i = 0; i < iterations_; ++i) completed_.push_back({static_cast<std::uint32_t>(i), now, now});
    completed_iterations_ = iterations_;
    return;
  }
  if (o_.open_loop) {
    plan_open_loop_iteration(0);
  } else if (p_.iteration_barrier) {
    enter_iteration(0, now);
  } else {
    for (OpIndex op : own_) arm(op, 0, now);
  }
}

void Executor::enter_iteration(std::uint32_t iteration, Nanos now) {
  for (OpIndex op : own_) arm(op, iteration, now);
}

void Executor::reached(std::uint32_t iteration, bool own, Nanos now) {
  if (iteration < first_tracked_) throw std::logic_error("event for a completed iteration");
  const std::uint64_t k = iteration - first_tracked_;
  track_until(k);
  ++tracked_[k].count;
  if (own && ++tracked_[k].own == own_.size() && k == 0 && barrier_) ++awaited_version_;
  while (!tracked_.empty() && tracked_.front().count == per_iteration_total_) {
    const auto done = static_cast<std::uint32_t>(first_tracked_);
    const Nanos started = tracked_.front().start >= 0 ? tracked_.front().start : now;
    completed_.push_back({done, started, now});
    tracked_.pop_front();
    if (barrier_) ++awaited_version_;
    ++first_tracked_;
    ++completed_iterations_;
    if (barrier_ && completed_iterations_ < iterations_) {
      enter_iteration(static_cast<std::uint32_t>(completed_iterations_), now);
    }
  }
}

void Executor::arm(OpIndex op, std::uint32_t iteration, Nanos now) {
  // Note when the rank started working on this iteration.
  if (iteration >= first_tracked_) {
    const std::uint64_t k = iteration - first_tracked_;
    track_until(k);
    if (tracked_[k].start < 0) tracked_[k].start = now;
  }
  armed_iter_[op] = iteration;
  std::uint32_t missing = 0;
  for (const Dependency& d : p_.ops[op].after) {
    const std::int64_t need = static_cast<std::int64_t>(iteration) - d.iterations_back;
    if (need >= 0 && count_[d.op] <= static_cast<std::uint64_t>(need)) ++missing;
  }
  missing_[op] = missing;
  set_waiting(op, missing > 0);
  if (missing == 0) ready(op, iteration, now);
}

void Executor::track_until(std::uint64_t k) {
  if (tracked_.size() > k) return;
  if (barrier_ && tracked_.empty()) ++awaited_version_;  // a new front
  tracked_.resize(k + 1);
}

void Executor::set_waiting(OpIndex op, bool waiting) {
  if (waiting_[op] == waiting) return;
  waiting_[op] = waiting;
  for (FlowIndex f : waits_on_[op]) {
    if (waiting ? waiters_[f]++ == 0 : --waiters_[f] == 0) ++awaited_version_;
  }
}

void Executor::ready(OpIndex op, std::uint32_t iteration, Nanos now) {
  const Op& o = p_.ops[op];
  const Queued q{now + o.gap_in(iteration), op, iteration};
  if (o.type == OpType::compute) {
    compute_queue_.push(q);
    dispatch_compute(now);
  } else {
    flow_queue_[o.flow].push(q);
    dispatch_flow(o.flow, now);
  }
}

void Executor::dispatch_compute(Nanos now) {
  if (computing_ || compute_queue_.empty() || compute_queue_.top().at > now) return;
  const Queued q = compute_queue_.top();
  compute_queue_.pop();
  computing_ = true;
  const auto scaled = static_cast<Nanos>(std::llround(static_cast<double>(p_.ops[q.op].duration_in(q.iteration)) * o_.slowdown));
  actions_.push_back({Action::Kind::compute, q.op, q.iteration, q.at, std::max<Nanos>(scaled, 0)});
}

void Executor::dispatch_flow(FlowIndex flow, Nanos now) {
  MinHeap& queue = flow_queue_[flow];
  DueHeap& due = flow_due_[flow];
  if (flow_busy_[flow]) return;
  while (!queue.empty() && queue.top().at <= now) {
    due.push({p_.ops[queue.top().op].priority, queue.top()});
    queue.pop();
  }
  if (due.empty()) return;
  const Queued q = due.top().q;
  due.pop();
  flow_busy_[flow] = true;
  actions_.push_back({Action::Kind::send, q.op, q.iteration, q.at, 0});
  if (o_.open_loop && q.iteration + 1 == open_loop_planned_ && --open_loop_pending_ == 0 &&
      open_loop_planned_ < iterations_) {
    plan_open_loop_iteration(static_cast<std::uint32_t>(open_loop_planned_));
  }
}

void Executor::plan_open_loop_iteration(std::uint32_t iteration) {
  const Nanos base = start_ + static_cast<Nanos>(iteration) * o_.period;
  const std::uint64_t k = iteration - first_tracked_;
  track_until(k);
  tracked_[k].start = base;
  open_loop_planned_ = iteration + 1;
  open_loop_pending_ = 0;
  for (OpIndex op : own_) {
    flow_queue_[p_.ops[op].flow].push({base + o_.offsets[op], op, iteration});
    ++open_loop_pending_;
  }
}

void Executor::tick(Nanos now) {
  dispatch_compute(now);
  for (FlowIndex f : own_flows_) dispatch_flow(f, now);
}

std::optional<Nanos> Executor::next_wake() const {
  std::optional<Nanos> wake;
  const auto consider = [&wake](Nanos t) {
    if (!wake || t < *wake) wake = t;
  };
  if (!computing_ && !compute_queue_.empty()) consider(compute_queue_.top().at);
  for (FlowIndex f : own_flows_) {
    if (!flow_busy_[f] && !flow_queue_[f].empty()) consider(flow_queue_[f].top().at);
  }
  return wake;
}

void Executor::counted(OpIndex op, std::uint32_t iteration, Nanos now) {
  if (count_[op] != iteration) throw std::logic_error("op instances must complete in order");
  count_[op] = iteration + 1;
  for (const Successor& s : succ_[op]) {
    if (armed_iter_[s.op] == static_cast<std::int64_t>(iteration) + s.back && missing_[s.op] > 0 &&
        --missing_[s.op] == 0) {
      set_waiting(s.op, false);
      ready(s.op, static_cast<std::uint32_t>(armed_iter_[s.op]), now);
    }
  }
  // Without the barrier an op's next instance waits only for this one (and its deps).
  if (is_own_[op] && !o_.open_loop && !p_.iteration_barrier && iteration + 1 < iterations_) {
    arm(op, iteration + 1, now);
  }
  reached(iteration, is_own_[op], now);
}

void Executor::compute_done(OpIndex op, std::uint32_t iteration, Nanos now) {
  computing_ = false;
  counted(op, iteration, now);
  dispatch_compute(now);
}

void Executor::send_done(OpIndex op, std::uint32_t iteration, Nanos now) {
  const FlowIndex flow = p_.ops[op].flow;
  flow_busy_[flow] = false;
  counted(op, iteration, now);
  dispatch_flow(flow, now);
}

void Executor::received(OpIndex op, std::uint32_t iteration, Nanos now) { counted(op, iteration, now); }

bool Executor::next_action(Action& out) {
  if (action_head_ == actions_.size()) {
    actions_.clear();
    action_head_ = 0;
    return false;
  }
  out = actions_[action_head_++];
  return true;
}

bool Executor::pop_completed(IterationTimes& out) {
  if (completed_.empty()) return false;
  out = completed_.front();
  completed_.pop_front();
  return true;
}

std::string Executor::waiting_for() const {
  if (finished()) return "nothing";
  const std::uint64_t it = completed_iterations_;
  std::string ops, msgs;
  std::size_t n_ops = 0, n_msgs = 0;
  for (std::size_t i = 0; i < p_.ops.size(); ++i) {
    if (count_[i] > it) continue;
    if (is_own_[i]) {
      if (++n_ops <= 3) ops += (ops.empty() ? "" : ", ") + p_.ops[i].id;
    } else if (is_incoming_[i]) {
      if (++n_msgs <= 3) msgs += (msgs.empty() ? "" : ", ") + p_.ops[i].id + " from rank " + std::to_string(p_.ops[i].rank);
    }
  }
  std::string out = "iteration " + std::to_string(it) + ": ";
  if (n_ops > 0) out += std::to_string(n_ops) + " own op(s) not done (" + ops + (n_ops > 3 ? ", ..." : "") + ")";
  if (n_msgs > 0) {
    out += std::string(n_ops > 0 ? "; " : "") + std::to_string(n_msgs) + " message(s) not received (" + msgs +
           (n_msgs > 3 ? ", ..." : "") + ")";
  }
  return out;
}

}  // namespace tw

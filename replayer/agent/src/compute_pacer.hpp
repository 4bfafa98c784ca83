// Keeps a replay's waits to their planned lengths although the agent's timers
// wake late (tens of microseconds when the host's cores are busy): 16 compute
// ops per iteration late by 25 us each made a 13 ms iteration 3% too long, and
// every gap before a send was as late again. Two corrections:
// - WakeDelay: timers are set early by the delay they have shown (a running
//   median of the delays seen so far). A compute then ends as often early as
//   late; waiting for a gap, the agent spins from the early wake-up to the
//   planned time, so that a send never goes before it.
// - ComputePacer: what one compute op still overran is carried into the next op
//   that was already waiting for the rank (ready before, or right as, the
//   previous one ended), which ends that much earlier (never before it started).
//   Lateness ahead of an idle stretch is absorbed by it, as in the job, and
//   dropped.
// The records keep the times things really took. Pure logic: the agent gives it
// clock readings, tests give it made-up ones.
#pragma once

#include <algorithm>

#include "tensorwire/core/units.hpp"

namespace tw {

class WakeDelay {
 public:
  explicit WakeDelay(Nanos max_early = 200 * kMicro) : max_early_(max_early) {}

  // How much earlier than wanted to set a timer.
  Nanos early() const { return early_; }
  // A timer set for `set` fired at `fired`: moves the median estimate 1 us toward it.
  void observe(Nanos set, Nanos fired) { early_ = std::clamp<Nanos>(early_ + (fired - set > early_ ? kStep : -kStep), 0, max_early_); }

 private:
  static constexpr Nanos kStep = kMicro;
  Nanos max_early_;
  Nanos early_ = 0;
};

class ComputePacer {
 public:
  // A compute ready up to `chain` after the previous one ended waited for it (or
  // for a send right after it), so it inherits its lateness; at most `max_carry`
  // is carried.
  explicit ComputePacer(WakeDelay& wake, Nanos chain = 50 * kMicro, Nanos max_carry = 2 * kMilli)
      : wake_(wake), chain_(chain), max_carry_(max_carry) {}

  // When to set the timer for an op that became ready at `ready`, starts at
  // `start` and lasts `duration`.
  Nanos deadline(Nanos ready, Nanos start, Nanos duration) {
    if (last_end_ < 0 || ready > last_end_ + chain_) carry_ = 0;
    used_ = std::clamp<Nanos>(carry_, 0, std::max<Nanos>(duration - 1, 0));
    intended_ = start + duration - used_;
    timer_ = std::max(start, intended_ - wake_.early());
    timed_ = timer_ > start;
    return timer_;
  }

  // The op whose deadline was asked last ended (its timer fired) at `now`.
  void ended(Nanos now) {
    if (timed_) wake_.observe(timer_, now);
    carry_ = std::clamp<Nanos>(carry_ - used_ + (now - intended_), 0, max_carry_);
    last_end_ = now;
  }

  Nanos carry() const { return carry_; }

 private:
  WakeDelay& wake_;
  Nanos chain_, max_carry_;
  Nanos carry_ = 0, used_ = 0, intended_ = 0, timer_ = 0, last_end_ = -1;
  bool timed_ = false;
};

}  // namespace tw

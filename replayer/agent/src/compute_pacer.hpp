// Keeps a replay's waits to their planned lengths although the agent's timers
// wake late (tens of microseconds when the host's cores are busy): 16 compute
// ops per iteration late by 25 us each made a 13 ms iteration 3% too long, and
// every gap before a send was as late again. Two pieces:
// - WakeDelay: a running mean of how late timers woke. The agent sets a timer
//   that much early and spins to the deadline where spinning is on; where it is
//   off (more agents than cores), a compute's or a gap's timer is set early, so
//   that its ends are on time on average. Set on time, every gap before a send
//   was the wake delay too long: DDP on 3 testbed hosts sharing 2 cores replayed
//   +8.2% (median of 5 sets of 3-4 replays) against +4.9% set early by the
//   median delay. An iteration is a sum of dozens of waits, so their mean is
//   what counts, and the delays are skewed (a busy core holds a wake for
//   hundreds of us): set early by the mean, the same replays ran +3.6% against
//   +4.8% by the median (sets of 4, no transmit timestamps, load 0.4).
// - ComputePacer: what one compute op overran (or fell short) is carried into
//   the next op that was already waiting for the rank (ready before, or right
//   as, the previous one ended), which ends that much earlier (later), never
//   before it started. Lateness ahead of an idle stretch is absorbed by it, as
//   in the job, and dropped.
// The records keep the times things really took. Pure logic: the agent gives it
// clock readings, tests give it made-up ones.
#pragma once

#include <algorithm>

#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

class WakeDelay {
 public:
  explicit WakeDelay(Nanos max_early = kMaxTimerLead) : max_early_(max_early) {}

  // How much earlier than wanted to set a timer.
  Nanos early() const { return early_; }
  // A timer set for `set` woke at `woke`. The estimate is a moving mean (weight
  // 1/16) of the delays, each taken as at most twice the bound, so that one wake
  // held for milliseconds does not set the next dozens far too early.
  void observe(Nanos set, Nanos woke) {
    const Nanos sample = std::clamp<Nanos>(woke - set, 0, 2 * max_early_);
    acc_ += sample - acc_ / kWeight;
    early_ = std::clamp<Nanos>(acc_ / kWeight, 0, max_early_);
  }

 private:
  static constexpr Nanos kWeight = 16;
  Nanos max_early_;
  Nanos early_ = 0;
  Nanos acc_ = 0;  // kWeight times the mean
};

// How to wait for a planned time: arm the timer for `set`, spin `spin` before
// it, and take the wake as happening at max(woken, `planned`). Spinning (spin >
// 0): woken `early` ahead (at least the spin window) and spun to `planned`, so
// nothing goes before it. Not spinning: the timer is set `early` ahead and what
// was planned goes when it fires, on time on average.
struct WakePlan {
  Nanos set, spin, planned;
};
inline WakePlan plan_wake(Nanos planned, Nanos spin, const WakeDelay& delay) {
  if (spin > 0) return {planned, std::max(spin, delay.early()), planned};
  return {planned - delay.early(), 0, planned};
}

class ComputePacer {
 public:
  // A compute ready up to `chain` after the previous one ended waited for it (or
  // for a send right after it), so it inherits its lateness or earliness; at most
  // `max_carry` either way is carried.
  explicit ComputePacer(Nanos chain = 50 * kMicro, Nanos max_carry = 2 * kMilli) : chain_(chain), max_carry_(max_carry) {}

  // When an op that became ready at `ready`, starts at `start` and lasts
  // `duration` should end.
  Nanos deadline(Nanos ready, Nanos start, Nanos duration) {
    if (last_end_ < 0 || ready > last_end_ + chain_) carry_ = 0;
    used_ = std::clamp<Nanos>(carry_, -max_carry_, std::max<Nanos>(duration - 1, 0));
    intended_ = start + duration - used_;
    return intended_;
  }

  // The op whose deadline was asked last ended at `now`.
  void ended(Nanos now) {
    carry_ = std::clamp<Nanos>(carry_ - used_ + (now - intended_), -max_carry_, max_carry_);
    last_end_ = now;
  }

  Nanos carry() const { return carry_; }

 private:
  Nanos chain_, max_carry_;
  Nanos carry_ = 0, used_ = 0, intended_ = 0, last_end_ = -1;
};

}  // namespace tw

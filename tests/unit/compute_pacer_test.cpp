#include "compute_pacer.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace tw {
namespace {

constexpr Nanos us(Nanos n) { return n * kMicro; }

TEST(WakeDelay, SettlesOnTheMeanDelayAndStaysWithinItsBound) {
  WakeDelay w(us(200));
  // Delays of 20, 30 and 100 us in turn: the mean is 50 us, not the median 30
  // (taken over one period of the three: a moving mean ripples).
  Nanos mean_over_period = 0;
  for (int i = 0; i < 300; ++i) {
    const Nanos set = us(1000) * i;
    const Nanos delay = i % 3 == 0 ? us(20) : i % 3 == 1 ? us(30) : us(100);
    w.observe(set, set + delay);
    if (i >= 297) mean_over_period += w.early();
  }
  EXPECT_GE(mean_over_period / 3, us(48));
  EXPECT_LE(mean_over_period / 3, us(52));
  // A wake held for 5 ms counts as 400 us (twice the bound): 20, 30 and 400
  // average 150 us (taken over one period of the three: the moving mean ripples).
  Nanos over_period = 0;
  for (int i = 0; i < 300; ++i) {
    const Nanos delay = i % 3 == 0 ? us(20) : i % 3 == 1 ? us(30) : us(5000);
    w.observe(0, delay);
    if (i >= 297) over_period += w.early();
  }
  EXPECT_GE(over_period / 3, us(145));
  EXPECT_LE(over_period / 3, us(155));
  for (int i = 0; i < 1000; ++i) w.observe(0, us(5000));
  EXPECT_EQ(w.early(), us(200)) << "never more than its bound ahead";
  for (int i = 0; i < 1000; ++i) w.observe(us(10), 0);
  EXPECT_EQ(w.early(), 0) << "nor behind the deadline";
}

// A timer armed for t wakes at t + 40 us, as on a host whose cores are busy.
// Returns when the planned work of each of 200 waits really went (the timer's
// call, after any spin to its deadline), relative to its plan.
std::vector<Nanos> waits(Nanos spin) {
  WakeDelay delay;
  std::vector<Nanos> went;
  for (int i = 0; i < 200; ++i) {
    const Nanos planned = us(1000) * (i + 1);
    const WakePlan plan = plan_wake(planned, spin, delay);
    const Nanos armed = plan.set - plan.spin;  // PreciseTimer arms the spin window early
    const Nanos woke = armed + us(40);
    delay.observe(armed, woke);
    const Nanos went_at = plan.spin > 0 ? std::max(woke, plan.set) : woke;  // PreciseTimer spins to `set`
    went.push_back(went_at - planned);
  }
  return went;
}

TEST(WakePlan, NotSpinningTheWaitIsSetEarlyByTheUsualDelayAndEndsOnTime) {
  const auto went = waits(0);
  EXPECT_EQ(went.front(), us(40)) << "nothing learnt yet: set on time, 40 us late";
  for (std::size_t i = 100; i < went.size(); ++i) EXPECT_LE(std::abs(went[i]), us(1)) << i;
}

TEST(WakePlan, SpinningNeverGoesBeforeThePlannedTime) {
  const auto went = waits(us(20));
  EXPECT_EQ(went.front(), us(20)) << "the 20 us spin window does not cover a 40 us delay";
  for (std::size_t i = 100; i < went.size(); ++i) {
    EXPECT_GE(went[i], 0) << i;
    EXPECT_LE(went[i], us(1)) << i << ": the estimate settles on the delay";
  }
  for (Nanos w : went) EXPECT_GE(w, 0);
}

TEST(ComputePacer, BackToBackOpsEndWhenTheSumOfTheirDurationsSays) {
  ComputePacer p;
  // Three ops queued behind each other, each timer 30 us late.
  Nanos t = 0;
  Nanos deadline = p.deadline(0, t, us(500));
  EXPECT_EQ(deadline, us(500));
  t = deadline + us(30);
  p.ended(t);
  EXPECT_EQ(p.carry(), us(30));
  deadline = p.deadline(0, t, us(500));  // was ready at 0: it waited for the first
  EXPECT_EQ(deadline - t, us(470)) << "shortened by what the first overran";
  t = deadline + us(30);
  p.ended(t);
  deadline = p.deadline(us(100), t, us(500));
  t = deadline + us(30);
  p.ended(t);
  EXPECT_EQ(t, us(1500) + us(30)) << "without the carry, 1590 us: one delay late, not three";
}

TEST(ComputePacer, EarlyAndLateEndsCancelAlongAChain) {
  ComputePacer p;
  // Timers set early by a wake-up estimate end 20 us early, then 20 us late, in turn.
  Nanos t = 0;
  for (int i = 0; i < 10; ++i) {
    const Nanos deadline = p.deadline(0, t, us(300));
    t = deadline + (i % 2 == 0 ? -us(20) : us(20));
    p.ended(t);
  }
  // An early end lengthens the next op as a late one shortens it: the chain ends
  // within one wake-up of the sum of its durations (the last one was late).
  EXPECT_EQ(t, us(3000) + us(20));
}

TEST(ComputePacer, LatenessBeforeAnIdleStretchIsNotCarried) {
  ComputePacer p;
  Nanos deadline = p.deadline(0, 0, us(500));
  p.ended(deadline + us(40));
  // The next op became ready long after: the rank was idle, the 40 us were absorbed.
  deadline = p.deadline(us(2000), us(2000), us(500));
  EXPECT_EQ(deadline, us(2500));
  EXPECT_EQ(p.carry(), 0);
}

TEST(ComputePacer, NeverEndsAnOpBeforeItStarted) {
  ComputePacer p(us(50), us(2000));
  p.ended(p.deadline(0, 0, us(100)) + us(900));  // one long stall
  const Nanos start = us(1000);
  const Nanos deadline = p.deadline(start - us(10), start, us(300));
  EXPECT_GT(deadline, start);
  EXPECT_LT(deadline, start + us(300));
  p.ended(start + us(5));
  EXPECT_GT(p.carry(), 0) << "what could not be made up stays owed";
}

}  // namespace
}  // namespace tw

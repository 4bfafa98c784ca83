// The precise timer's spin, on a clock the test advances: no sleeping. Deadlines
// on the fake clock are in the real clock's past, so the Asio timer fires at once
// and only the spin decides when the call happens.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <vector>

#include "precise_timer.hpp"

namespace tw {
namespace {

Nanos fake_now = 0;
int reads = 0;
Nanos ticking_clock() {
  ++reads;
  return fake_now += 100;  // each read of the clock takes 100 ns
}

void reset() {
  fake_now = 0;
  reads = 0;
}

TEST(PreciseTimer, SpinsToTheDeadline) {
  reset();
  boost::asio::io_context ctx;
  PreciseTimer t(ctx, 10'000, ticking_clock);
  std::vector<Nanos> calls;
  t.at(1'000, [&](Nanos now) { calls.push_back(now); });
  ctx.run();
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0], 1'000) << "the first reading at or past the deadline";
  EXPECT_EQ(reads, 10);
}

TEST(PreciseTimer, WithoutSpinCallsAtOnce) {
  reset();
  boost::asio::io_context ctx;
  PreciseTimer t(ctx, 0, ticking_clock);
  Nanos got = -1;
  t.at(1'000'000, [&](Nanos now) { got = now; });
  ctx.run();
  EXPECT_EQ(got, 200) << "no busy-wait: the timer's wake-up is the call";
  EXPECT_EQ(reads, 2) << "one reading to arm, one at the call";
}

TEST(PreciseTimer, ALateWakeUpDoesNotSpin) {
  reset();
  fake_now = 5'000;
  boost::asio::io_context ctx;
  PreciseTimer t(ctx, 10'000, ticking_clock);
  Nanos got = -1;
  t.at(1'000, [&](Nanos now) { got = now; });
  ctx.run();
  EXPECT_EQ(got, 5'200) << "due when armed: called at once, without a timer";
  EXPECT_EQ(reads, 2);
}

TEST(PreciseTimer, AWindowForOneCallAndWhenItWoke) {
  reset();
  boost::asio::io_context ctx;
  PreciseTimer t(ctx, 0, ticking_clock);
  Nanos got = -1, woke = -1;
  bool timed = true;
  // Due within the 5 us window asked for this call: posted, spun to the deadline.
  t.at(3'000, [&](Nanos now) { got = now, woke = t.woke(), timed = t.timed(); }, 5'000);
  ctx.run();
  EXPECT_EQ(got, 3'000) << "never before the deadline";
  EXPECT_EQ(woke, 200) << "the reading before the spin";
  EXPECT_FALSE(timed) << "posted, not woken by the timer";
  // Not due: the Asio timer wakes it (at once here: fake times are in the past).
  ctx.restart();
  t.at(1'000'000, [&](Nanos) { timed = t.timed(); });
  ctx.run();
  EXPECT_TRUE(timed);
}

TEST(PreciseTimer, ACancelledPostedCallDoesNotRun) {
  reset();
  boost::asio::io_context ctx;
  PreciseTimer t(ctx, 0, ticking_clock);
  int calls = 0;
  t.at(0, [&](Nanos) { ++calls; });  // due: posted
  t.cancel();
  ctx.run();
  EXPECT_EQ(calls, 0);
}

TEST(PreciseTimer, ArmingAgainReplacesAndCancelDrops) {
  reset();
  boost::asio::io_context ctx;
  PreciseTimer t(ctx, 1'000, ticking_clock);
  std::vector<int> which;
  t.at(500, [&](Nanos) { which.push_back(1); });
  t.at(700, [&](Nanos) { which.push_back(2); });
  ctx.run();
  EXPECT_EQ(which, std::vector<int>{2});
  ctx.restart();
  t.at(900, [&](Nanos) { which.push_back(3); });
  t.cancel();
  ctx.run();
  EXPECT_EQ(which, std::vector<int>{2});
}

}  // namespace
}  // namespace tw

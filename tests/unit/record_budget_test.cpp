// The records an agent's run can push at most, which size its recorder's queue:
// counted per rank from the profile, saturating, and never below the smallest
// queue or above each producer's share.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "inline_profile.hpp"
#include "record_budget.hpp"
#include "recorder.hpp"

namespace tw {
namespace {

TEST(RecordBudget, CountsWhatEachRankRecordsPerIteration) {
  const Profile p = test::one_message("1ms", "4KiB", 3);
  // Rank 0 per iteration: its compute, the send and its transmit timestamps, the
  // iteration, one TCP_INFO sample for its one outgoing flow.
  EXPECT_EQ(most_records(p, 0, 3), 3U * 5);
  // Rank 1: its compute, the receive, the iteration; it sends nothing.
  EXPECT_EQ(most_records(p, 1, 3), 3U * 3);
  // A rank with no ops still records its iterations.
  EXPECT_EQ(most_records(p, 7, 3), 3U);
  EXPECT_EQ(most_records(p, 0, 0), 0U);
}

TEST(RecordBudget, SaturatesInsteadOfOverflowing) {
  const Profile p = test::one_message("1ms", "4KiB");
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(most_records(p, 0, kMax), kMax);
  EXPECT_EQ(most_records(p, 0, kMax / 5), kMax / 5 * 5);
  EXPECT_EQ(most_records(p, 0, kMax / 5 + 1), kMax);
}

TEST(RecordBudget, TheQueueHoldsTheWholeRunOrEachProducersShare) {
  EXPECT_EQ(Recorder::per_producer(1, 10), Recorder::kSmallest);
  EXPECT_EQ(Recorder::per_producer(1, 5000), 5000U);
  EXPECT_EQ(Recorder::per_producer(4, 5000), 5000U) << "any one producer may push every record";
  EXPECT_EQ(Recorder::per_producer(1, std::numeric_limits<std::uint64_t>::max()), Recorder::kCapacity);
  EXPECT_EQ(Recorder::per_producer(2, Recorder::kCapacity), Recorder::kCapacity / 2);
  EXPECT_EQ(Recorder::per_producer(64, Recorder::kCapacity), Recorder::kMinPerProducer);
  EXPECT_EQ(Recorder::per_producer(0, Recorder::kCapacity), Recorder::kCapacity) << "no producers counts as one";
}

TEST(RecordBudget, TheWriterSleepsLongOnlyWhenTheQueueHoldsTheRun) {
  // Nothing can be dropped for want of a pass of the writer: it may idle long.
  EXPECT_EQ(Recorder::idle_sleep(1, 5000), Recorder::kIdleSleepWhole);
  EXPECT_EQ(Recorder::idle_sleep(4, 5000), Recorder::kIdleSleepWhole);
  EXPECT_EQ(Recorder::idle_sleep(1, 0), Recorder::kIdleSleepWhole);
  // A queue capped below the run drains in time only if the writer comes often.
  EXPECT_EQ(Recorder::idle_sleep(1, Recorder::kCapacity + 1), Recorder::kIdleSleep);
  EXPECT_EQ(Recorder::idle_sleep(2, Recorder::kCapacity), Recorder::kIdleSleep);
  EXPECT_EQ(Recorder::idle_sleep(1, std::numeric_limits<std::uint64_t>::max()), Recorder::kIdleSleep);
}
static_assert(Recorder::kIdleSleepWhole > Recorder::kIdleSleep);

TEST(RecordBudget, TheWriterComesOftenOnlyWhenRecordsComeFast) {
  using std::chrono::milliseconds;
  const std::size_t room = Recorder::kMinPerProducer;
  const auto whole = Recorder::kIdleSleepWhole;
  // A trickle of records (a few a pass): the writer backs off to kTrickleSleep,
  // not further while records come, even when the queue holds the run.
  milliseconds s = Recorder::kSleep;
  for (int i = 0; i < 20; ++i) s = Recorder::next_sleep(s, 16, room, whole);
  EXPECT_EQ(s, Recorder::kTrickleSleep);
  // Nothing came: it may idle as long as the queue allows.
  for (int i = 0; i < 20; ++i) s = Recorder::next_sleep(s, 0, room, whole);
  EXPECT_EQ(s, whole);
  for (int i = 0; i < 20; ++i) s = Recorder::next_sleep(s, 0, room, Recorder::kIdleSleep);
  EXPECT_EQ(s, Recorder::kIdleSleep);
  // Records again after a long idle: a trickle comes back to kTrickleSleep, a
  // burst at once to kSleep.
  EXPECT_EQ(Recorder::next_sleep(whole, 1, room, whole), Recorder::kTrickleSleep);
  EXPECT_EQ(Recorder::next_sleep(whole, room / 8 + 1, room, whole), Recorder::kSleep);
  EXPECT_EQ(Recorder::next_sleep(Recorder::kTrickleSleep, room / 8 + 1, room, whole), Recorder::kSleep);
  // An eighth of a producer's room or less is still a trickle.
  EXPECT_EQ(Recorder::next_sleep(milliseconds(8), room / 8, room, whole), milliseconds(16));
}
// A trickle's longest sleep, at a million records a second, fills under half of
// the smallest room a producer has; an idle spell's fits it.
static_assert(Recorder::kTrickleSleep.count() * 1000 * 2 <= static_cast<long>(Recorder::kMinPerProducer));
static_assert(Recorder::kIdleSleep.count() * 1000 <= static_cast<long>(Recorder::kMinPerProducer));
static_assert(Recorder::kTrickleSleep < Recorder::kIdleSleep);

}  // namespace
}  // namespace tw

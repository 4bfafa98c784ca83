// Which SO_TIMESTAMPING report fills which field of which message, with reports
// made by hand: no socket.
#include <gtest/gtest.h>

#include "tx_stamp_tracker.hpp"

namespace tw {
namespace {

TxStamp stamp(TxStamp::Type type, std::uint64_t key, std::int64_t at) {
  TxStamp s;
  s.type = type;
  s.key = static_cast<std::uint32_t>(key);
  s.realtime_ns = at;
  return s;
}
constexpr auto kSched = TxStamp::Type::sched;
constexpr auto kSoft = TxStamp::Type::software;
constexpr auto kAck = TxStamp::Type::ack;

void expect_popped(const std::optional<TxTimestampsRecord>& r, OpIndex op, std::int64_t wire_first, std::int64_t wire_last,
                   std::int64_t acked) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, op);
  EXPECT_EQ(r->wire_first, wire_first);
  EXPECT_EQ(r->wire_last, wire_last);
  EXPECT_EQ(r->acked, acked);
}

TEST(TxStampTracker, EachKindFillsItsFieldsAndAnAckCompletesTheMessage) {
  TxStampTracker t(3, 7, 8);
  EXPECT_FALSE(t.track(11, 2, 1000).has_value());
  // The first write (offset 99) and then the last byte (offset 999).
  t.apply(stamp(kSched, 99, 10));
  t.apply(stamp(kSoft, 99, 20));
  t.apply(stamp(kSched, 999, 30));
  t.apply(stamp(kSoft, 999, 40));
  EXPECT_FALSE(t.pop().has_value()) << "not acknowledged yet";
  t.apply(stamp(kAck, 99, 45));  // an ACK of the first bytes is not the message's
  EXPECT_FALSE(t.pop().has_value());
  t.apply(stamp(kAck, 999, 50));
  const auto r = t.pop();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->flow, 7U);
  EXPECT_EQ(r->op, 11U);
  EXPECT_EQ(r->iteration, 2U);
  EXPECT_EQ(r->bytes, 1000U);
  EXPECT_EQ(r->sched_first, 10);
  EXPECT_EQ(r->wire_first, 20);
  EXPECT_EQ(r->sched_last, 30);
  EXPECT_EQ(r->wire_last, 40);
  EXPECT_EQ(r->acked, 50);
  EXPECT_EQ(t.lost(), 0U);
  EXPECT_FALSE(t.pop().has_value());
}

TEST(TxStampTracker, AReportCoversEveryMessageEndingAtOrBeforeItsKeyAndKeepsTheFirst) {
  TxStampTracker t(0, 0, 8);
  t.track(1, 0, 100);  // bytes 0..99
  t.track(2, 0, 100);  // 100..199
  t.track(3, 0, 100);  // 200..299
  // A merged segment: one report for offset 249 covers messages 1 and 2 whole, and
  // message 3's first bytes.
  t.apply(stamp(kSoft, 249, 5));
  t.apply(stamp(kSoft, 299, 6));
  t.apply(stamp(kSoft, 99, 7));  // late: every field it covers is already set
  t.apply(stamp(kAck, 199, 8));  // cumulative: acknowledges 1 and 2
  auto a = t.pop(), b = t.pop();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->wire_first, 5);
  EXPECT_EQ(a->wire_last, 5);
  EXPECT_EQ(b->wire_last, 5);
  EXPECT_EQ(a->acked, 8);
  EXPECT_EQ(b->acked, 8);
  EXPECT_FALSE(t.pop().has_value());
  const auto c = t.pop(true);  // the end of the flow: whatever it has
  ASSERT_TRUE(c);
  EXPECT_EQ(c->op, 3U);
  EXPECT_EQ(c->wire_first, 5);
  EXPECT_EQ(c->wire_last, 6);
  EXPECT_EQ(c->acked, -1);
  EXPECT_EQ(t.lost(), 1U + 1U + 2U) << "sched_last of each, and acked of the last";
}

// Sampled stamping (--tx-stamp-every N): a message not asked about takes its
// bytes in the stream but yields no record; without TX_SCHED its sched fields
// are not counted lost.
TEST(TxStampTracker, UnstampedMessagesOnlyTakeTheirPlaceInTheStream) {
  TxStampTracker t(0, 0, 8, false);
  t.track(1, 0, 100, true);    // bytes 0..99
  t.track(2, 0, 100, false);   // 100..199: not asked
  t.track(3, 0, 100, true);    // 200..299
  t.apply(stamp(kSoft, 299, 10));
  t.apply(stamp(kAck, 299, 20));
  const auto a = t.pop();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->op, 1U);
  EXPECT_EQ(a->wire_last, 10) << "a report covers the messages that end before its key";
  EXPECT_EQ(a->acked, 20);
  const auto b = t.pop();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->op, 3U) << "the unstamped message between has no record";
  EXPECT_EQ(b->wire_last, 10);
  EXPECT_FALSE(t.pop().has_value());
  EXPECT_EQ(t.lost(), 0U) << "no sched was asked for";
}

TEST(TxStampTracker, KeysWrapAt32Bits) {
  TxStampTracker t(0, 0, 4);
  const std::uint64_t before = (std::uint64_t{1} << 32) - 50;
  t.track(1, 0, before);  // fills the stream up to 2^32 - 50
  t.apply(stamp(kAck, before - 1, 1));
  ASSERT_TRUE(t.pop());
  t.track(2, 0, 100);  // 2^32 - 50 .. 2^32 + 49: its last byte's key wrapped to 49
  t.apply(stamp(kSoft, before + 10, 2));  // key 2^32 - 40
  t.apply(stamp(kAck, before + 99, 3));  // key 49
  const auto r = t.pop();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->wire_first, 2);
  EXPECT_EQ(r->wire_last, -1);
  EXPECT_EQ(r->acked, 3);
}

TEST(TxStampTracker, AFullRingGivesUpOnTheOldest) {
  TxStampTracker t(0, 0, 2);
  EXPECT_FALSE(t.track(1, 0, 10));
  EXPECT_FALSE(t.track(2, 0, 10));
  t.apply(stamp(kSoft, 9, 4));
  const auto given_up = t.track(3, 0, 10);
  ASSERT_TRUE(given_up);
  EXPECT_EQ(given_up->op, 1U);
  EXPECT_EQ(given_up->wire_last, 4);
  EXPECT_EQ(given_up->acked, -1);
  EXPECT_EQ(t.lost(), 2U);
  t.apply(stamp(kAck, 29, 9));  // unwrapped against message 2, the oldest now
  EXPECT_EQ(t.pop()->op, 2U);
  EXPECT_EQ(t.pop()->op, 3U);
}

// The kernel drops the reports that do not fit in the socket's receive buffer, so
// messages await ACKs that never come until the ring gives up on them; their
// late reports must not stamp the messages after them (unwrapped against the
// oldest message awaiting, a key behind it would land 4 GB ahead and cover all).
TEST(TxStampTracker, AReportAboutAMessageGivenUpOnIsIgnored) {
  TxStampTracker t(0, 0, 2);
  t.track(1, 0, 10);  // bytes 0..9
  t.track(2, 0, 10);  // 10..19
  const auto given_up = t.track(3, 0, 10);  // 20..29: gives up on message 1
  ASSERT_TRUE(given_up);
  EXPECT_EQ(given_up->op, 1U);
  t.apply(stamp(kSoft, 9, 5));  // message 1's, late
  t.apply(stamp(kAck, 9, 6));
  t.apply(stamp(kSoft, 30, 7));  // beyond every byte written
  t.apply(stamp(kSoft, 19, 8));  // message 2's
  t.apply(stamp(kAck, 19, 9));
  expect_popped(t.pop(), 2, 8, 8, 9);
  expect_popped(t.pop(true), 3, -1, -1, -1);  // not stamped by a report about another message
}

// The edges: a key names a byte from the oldest message awaiting its ACK to the
// last byte written, unstamped messages included.
TEST(TxStampTracker, AKeyNamesAByteFromTheOldestAwaitingToTheLastWritten) {
  TxStampTracker t(0, 0, 4);
  t.track(1, 0, 10);         // bytes 0..9
  t.track(2, 0, 10);         // 10..19
  t.track(3, 0, 10, false);  // 20..29, unstamped: written all the same
  t.apply(stamp(kAck, 9, 1));
  ASSERT_EQ(t.pop()->op, 1U);
  t.apply(stamp(kSoft, 9, 2));   // before the oldest awaiting: ignored
  t.apply(stamp(kSoft, 10, 3));  // its first byte
  t.apply(stamp(kSoft, 29, 4));  // the last byte written
  t.apply(stamp(kAck, 30, 5));   // beyond it: ignored
  t.apply(stamp(kAck, 19, 6));
  expect_popped(t.pop(), 2, 3, 4, 6);
}

TEST(TxStampTracker, ReportsWithNothingInFlightAreIgnored) {
  TxStampTracker t(0, 0, 2);
  t.apply(stamp(kAck, 5, 1));
  EXPECT_FALSE(t.pop(true));
  t.track(1, 0, 10);
  EXPECT_EQ(t.pop(true)->acked, -1) << "the report came before the message";
}

}  // namespace
}  // namespace tw

// When a receiving flow naps out of epoll instead of waiting there, and when
// its I/O thread's nap ends (read_nap.hpp): times and byte counts given, no
// socket, no clock.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>

#include "clock.hpp"
#include "nap_group.hpp"
#include "read_nap.hpp"

namespace tw {
namespace {

constexpr Nanos kNap = 200 * kMicro;
constexpr std::uint64_t kMiB = 1024 * 1024;

TEST(ReadNap, OnlyAmidAMessageWhoseRestIsTwoNapsAwayAtItsRateSoFar) {
  const ReadNap nap(kNap);
  // A million bytes came in the 1 ms since the message began (8 Gb/s):
  // 200 000 a nap. 7 MiB to come is far off; 400 000 bytes two naps away.
  const Nanos began = 1000 * kMicro, now = 2000 * kMicro;
  EXPECT_TRUE(nap.worth(now, began, 1000000, 7 * kMiB));
  EXPECT_TRUE(nap.worth(now, began, 1000000, 400000));
  EXPECT_FALSE(nap.worth(now, began, 1000000, 399999)) << "its last byte could come within two naps";
  EXPECT_FALSE(nap.worth(now, began, kMiB, 0)) << "between messages: the next one's first byte is read as it comes";
  EXPECT_FALSE(nap.worth(now, began, 0, 7 * kMiB)) << "nothing came: no rate to tell";
  EXPECT_FALSE(nap.worth(began + kNap / 2 - 1, began, kMiB / 1000, 7 * kMiB)) << "too little time seen";
  EXPECT_TRUE(nap.worth(began + kNap / 2, began, kMiB / 1000, 7 * kMiB));
}

TEST(ReadNap, NoneWithoutALengthAndNoOverflowWithHugeMessages) {
  EXPECT_FALSE(ReadNap(0).worth(2 * kSecond, kSecond, kMiB, 7 * kMiB));
  EXPECT_FALSE(ReadNap(-5).worth(2 * kSecond, kSecond, kMiB, 7 * kMiB));
  const ReadNap nap(kNap);
  // 64 GiB to come, an hour in: the product overflows 64 bits.
  const std::uint64_t huge = std::uint64_t{64} << 30;
  EXPECT_TRUE(nap.worth(3600 * kSecond, 0, huge, huge));
  EXPECT_FALSE(nap.worth(3600 * kSecond, 0, ~std::uint64_t{0}, 1));
}

TEST(ReadNap, EmptyNapsInARowStopTheNapsUntilTheFlowSleptInEpoll) {
  ReadNap nap(kNap);
  const Nanos began = 0, now = kSecond;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i + 1 < ReadNap::kEmptyNaps; ++i) {
      nap.began();
      nap.ran_dry();  // gathered nothing
      EXPECT_TRUE(nap.worth(now, began, kMiB, 100 * kMiB)) << "a sender serves its flows by turns";
    }
    nap.began();
    nap.read(4096);  // one that gathered something starts the count again
    nap.ran_dry();
  }
  for (int i = 0; i < ReadNap::kEmptyNaps; ++i) {
    nap.began();
    nap.ran_dry();
  }
  EXPECT_FALSE(nap.worth(now, began, kMiB, 100 * kMiB)) << "a stalled sender costs a few naps, not one every nap";
  nap.ran_dry();  // dry again without a nap between: no change
  EXPECT_FALSE(nap.worth(now, began, kMiB, 100 * kMiB));
  nap.slept_in_epoll();
  EXPECT_TRUE(nap.worth(now, began, kMiB, 100 * kMiB));
  EXPECT_EQ(nap.naps(), 2U * ReadNap::kEmptyNaps + ReadNap::kEmptyNaps);
}

TEST(ReadNap, BytesCountOnlyAfterANap) {
  ReadNap nap(kNap);
  nap.read(1 << 20);  // read before any nap
  for (int i = 0; i < ReadNap::kEmptyNaps; ++i) {
    nap.began();
    nap.ran_dry();
  }
  EXPECT_FALSE(nap.worth(kSecond, 0, kMiB, 100 * kMiB)) << "what was read before the naps is not what they gathered";
}

TEST(NapDeadline, ANapLastsItsLengthAfterTheLastFlowRanDryAndAtMostTwoAfterTheFirst) {
  NapDeadline d(kNap);
  EXPECT_FALSE(d.napping());
  d.dry(1000 * kMicro);
  EXPECT_TRUE(d.napping());
  EXPECT_EQ(d.due(), 1200 * kMicro);
  d.dry(1150 * kMicro);
  EXPECT_EQ(d.due(), 1350 * kMicro) << "flows of the thread that ran dry later push it";
  d.dry(1300 * kMicro);
  EXPECT_EQ(d.due(), 1400 * kMicro) << "but no later than two naps after the first";
  d.ended();
  EXPECT_FALSE(d.napping());
  d.dry(5000 * kMicro);
  EXPECT_EQ(d.due(), 5200 * kMicro) << "the next nap starts afresh";
}

// NapGroup on a real io_context and clock: what it wakes, and never before its
// deadline (how long after is the scheduler's; not asserted).
struct Napper final : NapGroup::Napper {
  int woke = 0;
  Nanos at = 0;
  std::function<void()> then;
  void nap_ended() override {
    ++woke;
    at = mono_now();
    if (then) then();
  }
};

constexpr Nanos kShortNap = 2000 * kMicro;

TEST(NapGroup, WakesItsNappersTogetherANapAfterTheLastRanDry) {
  boost::asio::io_context ctx;
  NapGroup group(ctx, kShortNap);
  Napper a, b;
  const Nanos t0 = mono_now();
  group.nap(a, t0);
  group.nap(b, t0 + kShortNap / 2);  // ran dry half a nap later: the nap ends a nap after that
  EXPECT_TRUE(group.napping(a));
  ctx.run();
  EXPECT_EQ(a.woke, 1);
  EXPECT_EQ(b.woke, 1);
  EXPECT_GE(a.at, t0 + kShortNap * 3 / 2) << "the timer armed for the first was pushed";
  EXPECT_GE(b.at, a.at) << "woken in the order they napped";
  EXPECT_FALSE(group.napping(a));
}

TEST(NapGroup, ALeaverIsNotWokenAndTheLastToLeaveEndsTheNap) {
  boost::asio::io_context ctx;
  NapGroup group(ctx, kShortNap);
  Napper a, b;
  group.nap(a, mono_now());
  group.nap(b, mono_now());
  group.leave(a);  // closed
  ctx.run();
  EXPECT_EQ(a.woke, 0);
  EXPECT_EQ(b.woke, 1);
  // Everyone leaves while the timer is armed: the next napper's nap is its own,
  // a full length from when it ran dry, not what was left of theirs.
  ctx.restart();
  group.nap(a, mono_now() - 10 * kShortNap);
  group.leave(a);
  const Nanos t1 = mono_now();
  group.nap(b, t1);
  ctx.run();
  EXPECT_EQ(a.woke, 0);
  EXPECT_EQ(b.woke, 2);
  EXPECT_GE(b.at, t1 + kShortNap);
}

TEST(NapGroup, ANapperWokenMayNapAgainAndIsWokenAgain) {
  boost::asio::io_context ctx;
  NapGroup group(ctx, kShortNap);
  Napper a;
  a.then = [&] {
    if (a.woke < 3) group.nap(a, mono_now());
  };
  const Nanos t0 = mono_now();
  group.nap(a, t0);
  ctx.run();
  EXPECT_EQ(a.woke, 3);
  EXPECT_GE(a.at, t0 + 3 * kShortNap);
}

}  // namespace
}  // namespace tw

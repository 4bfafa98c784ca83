// Clock-sync rounds without a network: peers that answer (or not) on the
// io_context, a clock the test sets, and the two lifetime rules of
// clock_sync_round.hpp, each of which failed before it was fixed (the first
// under AddressSanitizer: a heap use after free).
#include "tensorwire/controller/clock_sync_round.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace tw {
namespace {

namespace asio = boost::asio;

// An agent whose clock is `offset` ahead; it answers every ping at once, or
// never when mute.
struct FakePeer : ClockPeer {
  FakePeer(asio::io_context& ioc, Notifier& n, Nanos& now, Nanos offset) : ioc(ioc), notifier(n), now(now), offset(offset) {}
  // The answer is timed from this ping's own sending, so that peers answering in
  // any interleaving each see a round trip of exactly 10.
  void send_ping(std::uint64_t seq) override {
    seqs.push_back(seq);
    if (mute) return;
    const Nanos sent = now;
    asio::post(ioc, [this, seq, sent] {
      now = std::max(now, sent + 10);  // the round trip
      on_pong(seq, sent + 5 + offset, sent + 10);
      notifier.notify();
    });
  }
  bool gone() const override { return is_gone; }
  asio::io_context& ioc;
  Notifier& notifier;
  Nanos& now;
  Nanos offset;
  bool mute = false;
  bool is_gone = false;
  std::vector<std::uint64_t> seqs;
};

TEST(ClockSyncRound, EstimatesTheOffset) {
  asio::io_context ioc;
  Notifier notifier(ioc.get_executor());
  Nanos now = 1'000'000;
  ClockSyncer syncer(notifier, [&now] { return now; });
  auto peer = std::make_shared<FakePeer>(ioc, notifier, now, 12345);
  bool ran = false;
  asio::co_spawn(ioc, syncer.round(peer, 4), [&](std::exception_ptr e, bool r) {
    ASSERT_FALSE(e);
    ran = r;
  });
  ioc.run();
  EXPECT_TRUE(ran);
  ASSERT_FALSE(peer->clock.empty());
  EXPECT_EQ(peer->clock.points().back().second.offset, 12345);
  EXPECT_EQ(peer->seqs, (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

// A run that fails mid-sync stops waiting (`wait` throws) while the rounds
// still run; their completions must not touch the waiting coroutine's frame.
TEST(ClockSyncRound, RoundsThatOutliveAnAbandonedWait) {
  asio::io_context ioc;
  Notifier notifier(ioc.get_executor());
  Nanos now = 0;
  ClockSyncer syncer(notifier, [&now] { return now; }, std::chrono::seconds(30));
  std::vector<std::shared_ptr<ClockPeer>> peers;
  std::vector<std::shared_ptr<FakePeer>> fakes;
  for (int i = 0; i < 3; ++i) {
    fakes.push_back(std::make_shared<FakePeer>(ioc, notifier, now, 0));
    fakes.back()->mute = true;
    peers.push_back(fakes.back());
  }
  struct Abandoned {};
  bool abandoned = false;
  const ClockSyncer::Wait give_up = [](std::function<bool()>) -> asio::awaitable<void> {
    throw Abandoned{};
    co_return;
  };
  asio::co_spawn(ioc, syncer.round_all(peers, 16, give_up), [&](std::exception_ptr e) { abandoned = e != nullptr; });
  // The wait is abandoned at once; the rounds go on waiting for answers. (Run
  // handler by handler until then: a fixed slice of time is too short on a slow
  // machine under a sanitizer.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!abandoned && std::chrono::steady_clock::now() < deadline) ioc.run_one_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(abandoned);
  EXPECT_FALSE(ioc.stopped());  // the rounds still wait
  // The agents go away: the rounds end, and their completions run.
  for (auto& f : fakes) f->is_gone = true;
  notifier.notify();
  ioc.run_for(std::chrono::seconds(5));
  EXPECT_TRUE(ioc.stopped());
  for (auto& f : fakes) EXPECT_FALSE(f->syncing());
}

// A re-sync that comes while a peer's round still runs is refused, and each
// peer numbers its own pings: a pong is only ever matched with its own ping.
TEST(ClockSyncRound, OneRoundAtATimePerPeer) {
  asio::io_context ioc;
  Notifier notifier(ioc.get_executor());
  Nanos now = 0;
  ClockSyncer syncer(notifier, [&now] { return now; });
  auto a = std::make_shared<FakePeer>(ioc, notifier, now, 100);
  auto b = std::make_shared<FakePeer>(ioc, notifier, now, -100);
  std::vector<bool> results;
  const auto record = [&](std::exception_ptr e, bool r) {
    ASSERT_FALSE(e);
    results.push_back(r);
  };
  asio::co_spawn(ioc, syncer.round(a, 8), record);
  asio::co_spawn(ioc, syncer.round(b, 8), record);
  asio::co_spawn(ioc, syncer.round(a, 8), record);  // a's first round still runs
  ioc.run();
  EXPECT_EQ(std::count(results.begin(), results.end(), false), 1);
  EXPECT_EQ(a->seqs.size(), 8u);  // one round's pings, not two interleaved
  EXPECT_EQ(a->seqs, b->seqs);    // each counts from 1
  EXPECT_EQ(a->clock.points().size(), 1u);
  EXPECT_EQ(a->clock.points().back().second.offset, 100);
  EXPECT_EQ(b->clock.points().back().second.offset, -100);
  // Once it ended, the next round runs.
  asio::co_spawn(ioc, syncer.round(a, 2), record);
  ioc.restart();
  ioc.run();
  EXPECT_TRUE(results.back());
  EXPECT_EQ(a->seqs.back(), 10u);
}

}  // namespace
}  // namespace tw

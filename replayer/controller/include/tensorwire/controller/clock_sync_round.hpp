// Rounds of clock synchronisation with agents: pings one after another, each
// answered within a deadline, the best sample kept (clock_sync.hpp). 16 pings
// with every agent before the start, 8 with each every few seconds during the
// run. Controller thread only.
//
// Lifetimes: a round may outlive the coroutine that started it (a run that fails
// mid-sync stops waiting for it); the round then only touches its peer, which
// it holds by shared_ptr. A peer runs at most one round at a time, and its ping
// sequence is its own, so a pong is only ever matched with its own ping.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tensorwire/controller/clock_sync.hpp"
#include "tensorwire/controller/notifier.hpp"

namespace tw {

// The controller's side of one agent's clock sync.
class ClockPeer {
 public:
  virtual ~ClockPeer() = default;
  virtual void send_ping(std::uint64_t seq) = 0;  // queue a ping; the answer goes to on_pong
  virtual bool gone() const = 0;                  // no answer will come any more

  // A pong read at `received` (controller clock); ignored unless it answers the
  // ping the current round waits for.
  void on_pong(std::uint64_t seq, Nanos t, Nanos received) {
    if (awaiting_ && seq == seq_) pong_ = ClockSample{ping_sent_, t, received};
  }
  bool syncing() const { return syncing_; }
  ClockTrack clock;  // every estimate so far

 private:
  friend class ClockSyncer;
  std::uint64_t seq_ = 0;
  bool awaiting_ = false;
  Nanos ping_sent_ = 0;
  std::optional<ClockSample> pong_;
  bool syncing_ = false;
};

class ClockSyncer {
 public:
  using Now = std::function<Nanos()>;  // the controller's CLOCK_REALTIME (injected in tests)
  // Waits until its predicate holds; throws to abandon the wait (the run failed).
  using Wait = std::function<boost::asio::awaitable<void>(std::function<bool()> done)>;

  ClockSyncer(Notifier& notifier, Now now, std::chrono::steady_clock::duration answer_timeout = std::chrono::seconds(2))
      : notifier_(notifier), now_(std::move(now)), answer_timeout_(answer_timeout) {}

  // One round with `peer`; adds its estimate to peer->clock when any ping was
  // answered. Returns false, doing nothing, when a round with it still runs.
  boost::asio::awaitable<bool> round(std::shared_ptr<ClockPeer> peer, int samples);

  // Rounds with every peer at once, waited for with `wait`. Exceptions from
  // `wait` propagate; the rounds then end on their own.
  boost::asio::awaitable<void> round_all(std::vector<std::shared_ptr<ClockPeer>> peers, int samples, Wait wait);

 private:
  boost::asio::awaitable<void> counted_round(std::shared_ptr<ClockPeer> peer, int samples, std::shared_ptr<std::size_t> pending);
  Notifier& notifier_;
  Now now_;
  std::chrono::steady_clock::duration answer_timeout_;
};

}  // namespace tw

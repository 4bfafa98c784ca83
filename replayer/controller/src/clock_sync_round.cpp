#include "tensorwire/controller/clock_sync_round.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>

#include "tensorwire/net/task.hpp"

namespace tw {

namespace asio = boost::asio;

asio::awaitable<bool> ClockSyncer::round(std::shared_ptr<ClockPeer> peer, int samples) {
  if (peer->syncing_) co_return false;
  peer->syncing_ = true;
  std::vector<ClockSample> got;
  for (int k = 0; k < samples && !peer->gone(); ++k) {
    peer->pong_.reset();
    peer->awaiting_ = true;
    peer->ping_sent_ = now_();
    peer->send_ping(++peer->seq_);
    const auto deadline = std::chrono::steady_clock::now() + answer_timeout_;
    while (!peer->pong_ && !peer->gone() && std::chrono::steady_clock::now() < deadline) co_await notifier_.wait(deadline);
    peer->awaiting_ = false;
    if (peer->pong_) got.push_back(*peer->pong_);
  }
  if (const auto e = estimate_clock_offset(got)) peer->clock.add(now_(), *e);
  peer->syncing_ = false;
  co_return true;
}

asio::awaitable<void> ClockSyncer::round_all(std::vector<std::shared_ptr<ClockPeer>> peers, int samples, Wait wait) {
  // Shared with the rounds, which may end after this
  // coroutine is gone (when `wait` throws).
  const auto pending = std::make_shared<std::size_t>(peers.size());
  auto ex = co_await asio::this_coro::executor;
  // The count lives in a coroutine of its own rather than in a completion
  // handler: GCC 12 destroys the handler of a co_spawn of awaitable<T> twice.
  for (const auto& p : peers) net::spawn_task(ex, counted_round(p, samples, pending), [](const std::string&) {});
  std::function<bool()> all_ended = [pending] { return *pending == 0; };
  co_await wait(std::move(all_ended));
}

asio::awaitable<void> ClockSyncer::counted_round(std::shared_ptr<ClockPeer> peer, int samples, std::shared_ptr<std::size_t> pending) {
  try {
    co_await round(std::move(peer), samples);
  } catch (...) {
    --*pending;
    notifier_.notify();
    throw;
  }
  --*pending;
  notifier_.notify();
}

}  // namespace tw

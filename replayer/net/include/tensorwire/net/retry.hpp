// Trying something until it works or a deadline passes, pausing 50 ms, then twice
// as long each time, at most 1 s: how agents dial their peers and the controller.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "tensorwire/core/units.hpp"

namespace tw::net {

struct Backoff {
  Nanos first = 50 * kMilli;
  Nanos most = kSecond;
};

// Calls `attempt()` (an awaitable yielding std::optional<T>: a value when it
// worked, std::nullopt to try again; it may set `last_error`) until it yields a
// value or `deadline` (std::chrono::steady_clock) passes; then returns nullopt.
// Exceptions from `attempt` propagate: they mean "stop trying".
template <typename T, typename Attempt>
boost::asio::awaitable<std::optional<T>> retry_until(std::chrono::steady_clock::time_point deadline, Attempt attempt,
                                                     Backoff b = {}) {
  auto ex = co_await boost::asio::this_coro::executor;
  Nanos pause = b.first;
  for (;;) {
    std::optional<T> got = co_await attempt();
    if (got) co_return got;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) co_return std::nullopt;
    boost::asio::steady_timer t(ex);
    t.expires_at(std::min(deadline, now + std::chrono::nanoseconds(pause)));
    co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    pause = std::min(pause * 2, b.most);
  }
}

}  // namespace tw::net

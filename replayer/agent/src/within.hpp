// A deadline for one socket operation of a coroutine: the handshakes of data
// flows (flow_connector.cpp) wait no longer than their budget for any step.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <memory>
#include <tuple>

#include "tensorwire/core/units.hpp"

namespace tw {

// Runs `op` (an awaitable on `sock` yielding a tuple whose first element is an
// error_code) and closes `sock` if `timeout` passes first, which makes the
// operation fail: a deadline for one operation.
//
// The guard closes the socket only while the operation is pending. On a loaded
// machine the timer often expires in the same turn of the loop as the operation
// completes, and its handler, already queued, runs anyway: closing then would
// hang up a connection that has moved on (the hello written after a connect that
// succeeded, which the peer accepts and then sees closed before any message) or
// touch a socket that no longer exists. An operation whose socket the guard
// closed counts as timed out, whatever it returned.
template <typename Op>
boost::asio::awaitable<boost::system::error_code> within(boost::asio::ip::tcp::socket& sock, Nanos timeout, Op op) {
  auto pending = std::make_shared<boost::asio::ip::tcp::socket*>(&sock);
  boost::asio::steady_timer guard(co_await boost::asio::this_coro::executor);
  guard.expires_after(std::chrono::nanoseconds(timeout));
  guard.async_wait([pending](const boost::system::error_code& ec) {
    if (!ec && *pending != nullptr) {
      boost::system::error_code ignored;
      (*pending)->close(ignored);
    }
  });
  const auto result = co_await op();
  *pending = nullptr;
  guard.cancel();
  const boost::system::error_code ec = std::get<0>(result);
  if (!ec && !sock.is_open()) co_return boost::asio::error::timed_out;
  co_return ec;
}

}  // namespace tw

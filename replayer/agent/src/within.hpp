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
// closed returns timed_out, whatever it returned itself (operation_aborted, or
// success when it completed just before the close).
//
// The coroutine's executor must run one handler at a time (an io_context run by
// one thread, or a strand), and `sock` must belong to it.
template <typename Op>
boost::asio::awaitable<boost::system::error_code> within(boost::asio::ip::tcp::socket& sock, Nanos timeout, Op op) {
  struct Guarded {
    boost::asio::ip::tcp::socket* sock;  // null once the operation completed
    bool fired = false;                  // the guard closed the socket
  };
  auto state = std::make_shared<Guarded>(Guarded{&sock});
  boost::asio::steady_timer guard(co_await boost::asio::this_coro::executor);
  guard.expires_after(std::chrono::nanoseconds(timeout));
  guard.async_wait([state](const boost::system::error_code& ec) {
    if (!ec && state->sock != nullptr) {
      boost::system::error_code ignored;
      state->sock->close(ignored);
      state->fired = true;
    }
  });
  const auto result = co_await op();
  state->sock = nullptr;
  guard.cancel();
  if (state->fired) co_return boost::asio::error::timed_out;
  co_return std::get<0>(result);
}

}  // namespace tw

// Wakes the controller's coroutines that wait for the run's state to change (an
// agent's message, a closed connection, a failure). Every wait has a deadline.
// Controller thread only.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <set>

namespace tw {

class Notifier {
 public:
  explicit Notifier(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
  // Returns when notified or at the deadline (CLOCK_MONOTONIC), whichever comes first.
  boost::asio::awaitable<void> wait(std::chrono::steady_clock::time_point deadline) {
    boost::asio::steady_timer t(ex_);
    t.expires_at(deadline);
    waiting_.insert(&t);
    co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    waiting_.erase(&t);
  }
  void notify() {
    for (auto* t : waiting_) t->cancel();
  }

 private:
  boost::asio::any_io_executor ex_;
  std::set<boost::asio::steady_timer*> waiting_;
};

}  // namespace tw

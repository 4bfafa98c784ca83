// Calls a function at a monotonic deadline, closer to it than a timer wakes up:
// sleeps on an Asio timer until `spin` before the deadline, then busy-waits the
// rest. One pending call at a time; arming again replaces it. The clock is
// injectable so that the spin logic is tested without sleeping. Single-threaded:
// the thread that runs the io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <utility>

#include "clock.hpp"

namespace tw {

class PreciseTimer {
 public:
  using Clock = Nanos (*)();  // monotonic nanoseconds

  PreciseTimer(boost::asio::io_context& ctx, Nanos spin, Clock clock = mono_now) : timer_(ctx), spin_(spin), clock_(clock) {}

  // Calls fn(now) once `now` (by the clock) reaches `deadline`, or as soon as the
  // timer fires when there is no spin. fn must not throw.
  // A deadline already due (or within the spin) is not given to the Asio timer:
  // arming one costs a timerfd_settime system call, which in a VM reprograms the
  // host's timer; that was a fifth of an agent's time replaying DDP.
  // `spin` >= 0 replaces the timer's own window for this call.
  template <typename F>
  void at(Nanos deadline, F fn, Nanos spin = -1) {
    const std::uint64_t g = ++generation_;
    if (spin < 0) spin = spin_;
    auto call = [this, deadline, spin, fn = std::move(fn), g](bool timed) mutable {
      if (g != generation_) return;
      Nanos now = clock_();
      woke_ = now;
      timed_ = timed;
      while (now < deadline && spin > 0) now = clock_();
      fn(now);
    };
    if (deadline - spin <= clock_()) {
      boost::asio::post(timer_.get_executor(), [call = std::move(call)]() mutable { call(false); });
      return;
    }
    timer_.expires_at(steady_at(deadline - spin));
    timer_.async_wait([call = std::move(call)](const boost::system::error_code& ec) mutable {
      if (!ec) call(true);
    });
  }

  // During fn: when the call woke up, before any spin, and whether the Asio
  // timer woke it (false: the deadline was due when armed, and it was posted).
  // What a wake-up delay estimate should see.
  Nanos woke() const { return woke_; }
  bool timed() const { return timed_; }

  void cancel() {
    ++generation_;
    timer_.cancel();
  }

 private:
  boost::asio::steady_timer timer_;
  Nanos spin_;
  Clock clock_;
  std::uint64_t generation_ = 0;
  Nanos woke_ = 0;
  bool timed_ = false;
};

}  // namespace tw

// The naps of an I/O thread's incoming flows (read_nap.hpp): one timer for all
// of them, so that the thread sleeps once its napping flows have all run dry
// and wakes them together.
// Single-threaded: the I/O thread of `ctx`, which must outlive the group.
#pragma once

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <vector>

#include "clock.hpp"
#include "read_nap.hpp"

namespace tw {

class NapGroup {
 public:
  struct Napper {
    virtual ~Napper() = default;
    virtual void nap_ended() = 0;
  };

  NapGroup(boost::asio::io_context& ctx, Nanos length) : deadline_(length), timer_(ctx) {}

  Nanos length() const { return deadline_.length(); }

  // `n` ran dry at `now` and naps until the thread's nap ends.
  void nap(Napper& n, Nanos now) {
    nappers_.push_back(&n);
    deadline_.dry(now);
    if (!armed_) arm(deadline_.due());
  }
  // `n` closes, or is destroyed: no wake-up for it. The last to leave ends the
  // nap, so that the next napper starts one of its own.
  void leave(Napper& n) {
    nappers_.erase(std::remove(nappers_.begin(), nappers_.end(), &n), nappers_.end());
    if (nappers_.empty()) deadline_.ended();
  }
  bool napping(const Napper& n) const { return std::find(nappers_.begin(), nappers_.end(), &n) != nappers_.end(); }

 private:
  void arm(Nanos at) {
    armed_ = true;
    timer_.expires_at(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(at)));
    // Aborted only when the io_context is destroyed, with the group and
    // its flows.
    timer_.async_wait([this](const boost::system::error_code& ec) {
      armed_ = false;
      if (!ec) fired();
    });
  }

  void fired() {
    if (nappers_.empty()) {
      deadline_.ended();
      return;
    }
    if (mono_now() < deadline_.due()) {  // flows that ran dry since it was armed
      arm(deadline_.due());
      return;
    }
    deadline_.ended();
    woken_.swap(nappers_);
    for (Napper* n : woken_) n->nap_ended();  // each may nap again, into nappers_
    woken_.clear();
  }

  NapDeadline deadline_;
  boost::asio::steady_timer timer_;
  bool armed_ = false;
  std::vector<Napper*> nappers_, woken_;
};

}  // namespace tw

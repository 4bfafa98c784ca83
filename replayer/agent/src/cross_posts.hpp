// Work handed to an I/O thread by another thread of the agent: to a flow's
// thread, a message to send (the ops run on the main thread), a flow to close or
// finish, a TCP_INFO snapshot to take; to the main thread, a message sent, a
// message received that an op waits for, a failure, a flow's end. Counts what was
// posted and has not run yet, so that the thread's flows end their turns early
// while any waits, once they moved 128 KiB in it (OutgoingFlow::write_some(),
// IncomingFlow::read_some()): the handed work then waits for about one write or
// read of each flow queued before it on that thread, not for a turn of each (4
// writes of up to 128 KiB for a flow that shares the thread, the rest of its
// message for one alone, or 16 reads).
//
// Without it, a flow on a thread other than the main one stood idle between two
// messages for the round trip to the ops and back, each leg behind the turns
// queued on its thread: four flows of 8 MiB messages on two I/O threads a side
// waited a median 155-172 us between messages in one run and 321-476 us in three
// more (p90 up to 1.3 ms), with their sockets drained meanwhile, against 1 us for
// the flows of the main thread; with it, 63-73 us in 5 of 6 flows of those three
// (2026-12-07, docs/dataplane-analyses.md, Work between threads).
//
// post() from any thread; waiting() on the thread that runs the io_context.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstdint>
#include <utility>

namespace tw {

class CrossPosts {
 public:
  template <typename F>
  void post(boost::asio::io_context& ctx, F&& fn) {
    waiting_.fetch_add(1, std::memory_order_relaxed);
    try {
      boost::asio::post(ctx, [this, fn = std::forward<F>(fn)]() mutable {
        waiting_.fetch_sub(1, std::memory_order_relaxed);
        fn();
      });
    } catch (...) {
      waiting_.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
  }
  // Posted from another thread and not yet run. A count left by handlers that
  // never ran (the context stopped) only ends turns early.
  bool waiting() const { return waiting_.load(std::memory_order_relaxed) > 0; }

 private:
  std::atomic<std::uint32_t> waiting_{0};
};

}  // namespace tw

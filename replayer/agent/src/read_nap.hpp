// --read-nap-us: when a receiving flow whose socket ran dry should sleep on a
// timer, out of epoll, rather than be woken by the next arrival.
//
// Where the machine has no core to spare, a reader that sleeps in epoll is woken
// by the next segment that lands, takes the core from the sender that queued
// it, reads the few tens of microseconds' worth it finds, and sleeps again. A
// bare receiver of 16 flows on two threads moved 53-77 Gb/s so and 65-105 when
// it slept 200 us out of epoll each time its sockets all ran dry; two agents of
// 16 flows on two I/O threads a side, each side on a core of its own, 48-51
// without naps and 52-54 with (2026-12-07, docs/dataplane-analyses.md, Naps).
// Only where an agent runs without a spin, its threads crowding the cores for
// the whole run: a nap taken because a core was short for a moment cost four
// flows on one thread a fifth of their rate (the Agent makes no NapGroup with a
// spin); and not where a flow waits with a low-water mark (IncomingFlow::nap()).
// A nap delays what arrives during it, so a flow naps only in the middle of a
// message whose rest cannot arrive within two naps (the longest a nap lasts)
// at the rate the message has come so far: its last byte, the time that counts
// (the message's receive time, and its delivery to the ops), is read as it
// comes, unless the rate more than doubles. And kEmptyNaps naps in a row that
// gathered nothing end the naps until the flow has slept in epoll: a stalled
// sender costs a few naps, not a timer every nap.
// Pure: the flow and its I/O thread's NapGroup (nap_group.hpp) give them the
// times and byte counts.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensorwire/core/units.hpp"

namespace tw {

class ReadNap {
 public:
  // A flow's sender serves it by turns with its other flows, so a nap of the
  // whole thread may end before a flow's next turn came.
  static constexpr int kEmptyNaps = 4;

  // `length`: the I/O thread's nap (NapDeadline); 0, no naps.
  explicit ReadNap(Nanos length) : length_(length > 0 ? length : 0) {}

  // The socket ran dry `got` bytes into a message begun at `began` (its first
  // byte), with `rest` to come, and the flow would sleep in epoll: whether to
  // nap instead. A nap lasts at most two lengths (NapDeadline).
  bool worth(Nanos now, Nanos began, std::uint64_t got, std::uint64_t rest) const {
    if (length_ == 0 || stalled_ || rest == 0 || got == 0) return false;
    const Nanos elapsed = now - began;
    if (elapsed < length_ / 2) return false;  // too little seen to tell its rate
    // rest / (got / elapsed) >= 2 lengths, without overflow.
    return static_cast<long double>(rest) * static_cast<long double>(elapsed) >=
           2.0L * static_cast<long double>(length_) * static_cast<long double>(got);
  }

  void began() {
    napping_ = true;
    gathered_ = 0;
    ++naps_;
  }
  void read(std::uint64_t n) {
    if (napping_) gathered_ += n;
  }
  // The socket ran dry again; after kEmptyNaps naps in a row that gathered
  // nothing, no more naps until slept_in_epoll().
  void ran_dry() {
    if (napping_) {
      empty_ = gathered_ == 0 ? empty_ + 1 : 0;
      if (empty_ >= kEmptyNaps) stalled_ = true;
    }
    napping_ = false;
  }
  void slept_in_epoll() {
    stalled_ = false;
    empty_ = 0;
  }


  std::uint64_t naps() const { return naps_; }

 private:
  Nanos length_;
  bool napping_ = false;  // the flow's reads follow a nap
  bool stalled_ = false;  // a nap gathered nothing
  std::uint64_t gathered_ = 0;
  int empty_ = 0;  // naps in a row that gathered nothing
  std::uint64_t naps_ = 0;
};

// An I/O thread's nap, shared by its flows: it begins when the last of its
// napping flows ran dry and lasts `length` from then, as a reader of all of them
// would sleep once they all ran dry, and ends no later than two lengths after
// the first of them began to nap, whatever the others do.
class NapDeadline {
 public:
  explicit NapDeadline(Nanos length) : length_(length) {}
  Nanos length() const { return length_; }
  void dry(Nanos now) {
    if (!napping_) first_ = now;
    napping_ = true;
    last_ = now;
  }
  bool napping() const { return napping_; }
  Nanos due() const { return std::min(last_ + length_, first_ + 2 * length_); }
  void ended() { napping_ = false; }

 private:
  Nanos length_;
  bool napping_ = false;
  Nanos first_ = 0, last_ = 0;
};

}  // namespace tw

// When a stream's bytes were first seen in their socket, before they were read.
//
// While a receiving flow waits out --read-gap-us it asks the kernel how much its
// socket holds (SIOCINQ) each time it would have read, and notes how far the
// stream then reached. The messages read afterwards take their arrival times from
// these notes: when the stream was first seen to reach the end of their header
// (recv_first) and of their payload (recv_last), as a read at that moment would
// have found them. Pure: no socket, no clock. Bounded: a flow whose notes are
// full reads instead.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tensorwire/core/units.hpp"

namespace tw {

class Sightings {
 public:
  static constexpr std::size_t kMost = 64;

  // The stream reached `end` (bytes from its start) at `at`, no earlier than any
  // sighting before. One that reaches no further than the last is not kept.
  // False when there is no room: the flow should read now (a read takes what was
  // seen, and the room comes back).
  bool note(Nanos at, std::uint64_t end) {
    if (end_ > begin_ && seen_[end_ - 1].end >= end) return true;
    if (end_ == kMost) return false;
    seen_[end_++] = {at, end};
    return true;
  }

  // When the stream was first seen to reach `end`; `otherwise` (the time of the
  // read that returned it) when no sighting did.
  Nanos arrived(std::uint64_t end, Nanos otherwise) const {
    for (std::size_t i = begin_; i < end_; ++i) {
      if (seen_[i].end >= end) return seen_[i].at;
    }
    return otherwise;
  }

  // The stream was read up to `read`: the sightings that reach no further go.
  void consumed(std::uint64_t read) {
    while (begin_ < end_ && seen_[begin_].end <= read) ++begin_;
    if (begin_ == end_) begin_ = end_ = 0;
  }

  std::size_t size() const { return end_ - begin_; }

 private:
  struct Seen {
    Nanos at;
    std::uint64_t end;
  };
  std::array<Seen, kMost> seen_{};
  std::size_t begin_ = 0, end_ = 0;  // the sightings kept, oldest first, each reaching further
};

}  // namespace tw

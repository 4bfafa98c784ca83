// Which transmit-timestamp report belongs to which message of one outgoing flow.
// Pure: no socket, no clock; the outgoing flow feeds it the messages it writes and
// the reports it drains (tx_timestamps.hpp), and records what comes out.
//
// A report for stream offset `key` at time t tells, for every message whose last
// byte is at or before `key`, that its last byte had reached that point by t (the
// kernel merges segments and ACKs are cumulative, so reports for some offsets never
// come); for the message holding `key`, that its first bytes had. Each field keeps
// the first report that covers it. A message is done once its last byte is
// acknowledged. Single-threaded: the agent's I/O thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/records.hpp"
#include "tx_timestamps.hpp"

namespace tw {

class TxStampTracker {
 public:
  // At most `capacity` messages await their ACK; allocates them all up front.
  // `sched`: TX_SCHED reports were asked for (else sched fields stay -1 and are not lost).
  TxStampTracker(RankId rank, FlowIndex flow, std::size_t capacity = 4096, bool sched = true);

  // The next `wire` bytes of the stream are message (op, iteration), whose
  // timestamps were asked for when `stamped` (else it only takes its place in
  // the stream, and yields no record). When `capacity` messages already await
  // their ACK, gives up on the oldest and returns its record (fields never
  // reported stay -1).
  std::optional<TxTimestampsRecord> track(OpIndex op, std::uint32_t iteration, std::uint64_t wire, bool stamped = true);

  // Applies one report to the messages it covers. Keys are 32-bit stream
  // offsets, unwrapped against the oldest message awaiting its ACK; a report
  // about none of the messages awaiting (one given up on) is ignored.
  void apply(const TxStamp& s);

  // The oldest message, once acknowledged (or, with `all`, whatever it has: at the
  // end of the flow); nullopt when there is none.
  std::optional<TxTimestampsRecord> pop(bool all = false);

  // Fields (wire_last, acked, and sched_last when asked for) of popped records that were never reported.
  std::uint64_t lost() const { return lost_; }

 private:
  struct InFlight {
    std::uint64_t begin = 0, end = 0;  // stream offsets of the message
    TxTimestampsRecord record;
  };

  TxTimestampsRecord take_oldest();

  std::vector<InFlight> ring_;  // in stream order from head_
  std::size_t head_ = 0, count_ = 0;
  std::uint64_t offset_ = 0;  // of the next message
  std::uint64_t lost_ = 0;
  RankId rank_;
  FlowIndex flow_;
  bool sched_;
};

}  // namespace tw

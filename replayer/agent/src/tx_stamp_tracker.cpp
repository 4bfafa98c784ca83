#include "tx_stamp_tracker.hpp"

namespace tw {

TxStampTracker::TxStampTracker(RankId rank, FlowIndex flow, std::size_t capacity, bool sched)
    : ring_(capacity == 0 ? 1 : capacity), rank_(rank), flow_(flow), sched_(sched) {}

std::optional<TxTimestampsRecord> TxStampTracker::track(OpIndex op, std::uint32_t iteration, std::uint64_t wire, bool stamped) {
  if (!stamped) {
    offset_ += wire;
    return std::nullopt;
  }
  std::optional<TxTimestampsRecord> given_up;
  if (count_ == ring_.size()) given_up = take_oldest();  // too many unacknowledged messages
  InFlight& m = ring_[(head_ + count_) % ring_.size()];
  m.begin = offset_;
  m.end = offset_ + wire;
  m.record = TxTimestampsRecord{};
  m.record.rank = static_cast<std::uint16_t>(rank_);
  m.record.op = op;
  m.record.iteration = iteration;
  m.record.flow = flow_;
  m.record.bytes = wire;
  offset_ += wire;
  ++count_;
  return given_up;
}

void TxStampTracker::apply(const TxStamp& s) {
  if (count_ == 0) return;
  const std::uint64_t base = ring_[head_].begin;
  const std::uint32_t ahead = s.key - static_cast<std::uint32_t>(base);
  // A key names a byte written: from the oldest message awaiting to the newest.
  // One outside (a late report about a message given up on, which unwrapped would
  // land 4 GB ahead and stamp every message in flight) is ignored, as long as the
  // messages in flight span less than the 4 GB the keys can tell apart.
  if (offset_ - base < (std::uint64_t{1} << 32) && ahead >= offset_ - base) return;
  const std::uint64_t key = base + ahead;
  for (std::size_t k = 0; k < count_; ++k) {
    InFlight& m = ring_[(head_ + k) % ring_.size()];
    if (m.begin > key) break;
    TxTimestampsRecord& r = m.record;
    const bool last = m.end - 1 <= key;
    const auto first_report = [&s](std::int64_t& field) {
      if (field < 0) field = s.realtime_ns;
    };
    switch (s.type) {
      case TxStamp::Type::sched:
        first_report(r.sched_first);
        if (last) first_report(r.sched_last);
        break;
      case TxStamp::Type::software:
        first_report(r.wire_first);
        if (last) first_report(r.wire_last);
        break;
      case TxStamp::Type::ack:  // an ACK covers whole bytes: it has no "first"
        if (last) first_report(r.acked);
        break;
    }
  }
}

std::optional<TxTimestampsRecord> TxStampTracker::pop(bool all) {
  if (count_ == 0 || (!all && ring_[head_].record.acked < 0)) return std::nullopt;
  return take_oldest();
}

TxTimestampsRecord TxStampTracker::take_oldest() {
  const TxTimestampsRecord r = ring_[head_].record;
  lost_ += (r.wire_last < 0 ? 1 : 0) + (r.acked < 0 ? 1 : 0) + (sched_ && r.sched_last < 0 ? 1 : 0);
  head_ = (head_ + 1) % ring_.size();
  --count_;
  return r;
}

}  // namespace tw

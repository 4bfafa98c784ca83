#include "tensorwire/controller/run_progress.hpp"

#include <algorithm>
#include <numeric>

namespace tw {

RunProgress::RunProgress(std::size_t ranks, std::uint64_t iterations)
    : ranks_(ranks), iterations_(iterations), rank_done_(ranks, 0), rank_bytes_(ranks, 0), rank_last_(ranks, -1) {}

bool RunProgress::iteration(RankId rank, std::uint64_t index, Nanos start, Nanos end) {
  if (rank >= ranks_ || index >= iterations_ || index != rank_done_[rank]) return false;
  ++rank_done_[rank];
  rank_last_[rank] = end - start;
  const std::uint64_t k = index - job_.size();
  while (pending_.size() <= k) pending_.push_back({});
  Pending& p = pending_[k];
  p.start = p.reported == 0 ? start : std::min(p.start, start);
  p.end = p.reported == 0 ? end : std::max(p.end, end);
  ++p.reported;
  while (!pending_.empty() && pending_.front().reported == ranks_) {
    job_.emplace_back(pending_.front().start, pending_.front().end);
    pending_.pop_front();
  }
  return true;
}

void RunProgress::bytes_sent(RankId rank, std::uint64_t bytes) {
  if (rank < ranks_) rank_bytes_[rank] = std::max(rank_bytes_[rank], bytes);
}

std::uint64_t RunProgress::total_bytes_sent() const {
  return std::accumulate(rank_bytes_.begin(), rank_bytes_.end(), std::uint64_t{0});
}

double RunProgress::bytes_per_second() const {
  if (job_.empty()) return 0;
  const Nanos span = job_.back().second - job_.front().first;
  if (span <= 0) return 0;
  return static_cast<double>(total_bytes_sent()) * 1e9 / static_cast<double>(span);
}

}  // namespace tw

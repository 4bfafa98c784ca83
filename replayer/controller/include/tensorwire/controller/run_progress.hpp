// What the controller knows of a run while it goes: each rank reports its
// iterations as they end (already on the controller's clock); an iteration is
// done job-wide once every rank reported it, and lasted from the earliest
// rank's start to the latest rank's end.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

class RunProgress {
 public:
  RunProgress(std::size_t ranks, std::uint64_t iterations);

  // Rank `rank` finished iteration `index`; reports of one rank come in order.
  // Returns false (and ignores it) for a rank or index out of range or out of order.
  bool iteration(RankId rank, std::uint64_t index, Nanos start, Nanos end);
  // A rank's cumulative bytes sent so far, for throughput.
  void bytes_sent(RankId rank, std::uint64_t bytes);

  std::uint64_t iterations() const { return iterations_; }
  std::uint64_t done() const { return job_.size(); }  // job-wide
  std::size_t ranks() const { return ranks_; }
  std::uint64_t rank_done(RankId rank) const { return rank_done_.at(rank); }
  // How long the rank's last finished iteration took on it (-1 before its first).
  Nanos rank_last(RankId rank) const { return rank_last_.at(rank); }
  bool finished() const { return done() == iterations_; }
  // Job-wide [start, end] of every completed iteration, in order.
  const std::vector<std::pair<Nanos, Nanos>>& job_iterations() const { return job_; }
  std::uint64_t total_bytes_sent() const;
  // Bytes per second over the completed iterations (0 before two reports).
  double bytes_per_second() const;

 private:
  struct Pending {
    Nanos start = 0, end = 0;
    std::size_t reported = 0;
  };
  std::size_t ranks_;
  std::uint64_t iterations_;
  std::vector<std::uint64_t> rank_done_;
  std::vector<std::uint64_t> rank_bytes_;
  std::vector<Nanos> rank_last_;
  std::deque<Pending> pending_;  // iterations done() .. : partial reports
  std::vector<std::pair<Nanos, Nanos>> job_;
};

}  // namespace tw

// The run summary an agent writes next to its records (rank-R.json): how the run
// ended, its clock, its iterations and counters, and the options it ran with.
// docs/results-format.md describes the file. Plain data; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

struct RunSummary {
  RankId rank = 0;
  std::string profile;  // as given (a path, or "run ID")
  std::uint64_t profile_digest = 0;
  std::uint64_t iterations = 0;
  bool finished = false;
  std::string error;
  Nanos realtime_minus_monotonic = 0;
  Nanos start = 0, end = 0;  // CLOCK_REALTIME; 0: never started / ended
  std::vector<std::pair<Nanos, Nanos>> iteration_times;  // CLOCK_REALTIME start, end
  std::uint64_t messages_sent = 0, bytes_sent = 0, messages_received = 0, bytes_received = 0;
  std::uint64_t records_written = 0, records_dropped = 0, tx_timestamps_lost = 0;
  std::uint64_t looks = 0, looks_skipped = 0;  // at dry sockets (IncomingFlow::looks())
  std::uint64_t naps = 0;  // IncomingFlow::naps()
  long max_rss_kib = 0;
  bool open_loop = false;
  double slowdown = 1.0;
  Nanos spin = 0, delay = 0;
  Nanos read_gap = 0;  // --read-gap-us: deliveries nobody waited for up to it late
  Nanos read_nap = 0;  // --read-nap-us
  bool tx_timestamps = true;
  std::uint32_t tx_stamp_every = 1;  // >1: transmit timestamps of every Nth message only (sampled)
  std::uint64_t tx_sched_flows = 0;  // outgoing flows that asked for TX_SCHED
  std::uint32_t io_threads = 1;
  std::vector<int> pinned_cores;  // of the I/O threads (--pin); empty: not pinned
  bool realtime = false;  // asked for; realtime_applied: granted
  bool realtime_applied = false;
  bool sched_batch = false;  // asked for; sched_batch_applied: every I/O thread runs at SCHED_BATCH
  bool sched_batch_applied = false;
  std::string congestion_control;  // the data sockets' (TCP_CONGESTION)

  std::string json() const;  // the file's text
  // Writes json() to `path` atomically; throws std::runtime_error on failure.
  void write(const std::string& path) const;
};

}  // namespace tw

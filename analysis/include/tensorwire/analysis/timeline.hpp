// One job's timings in one shape, whatever they came from: a replay's records
// (a run directory), a profile's observed timings, or a profile's own plan. Every
// time is relative to the start of the job-wide iteration it belongs to; -1 is
// "not known". `compare` holds two timelines against each other.
#pragma once

#include <string>
#include <vector>

#include "tensorwire/core/records.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

struct Instance {
  Nanos start = -1;  // compute: start; send: ready (the sender asked to send)
  Nanos end = -1;    // compute: end; send: the message's last byte arrived
  Nanos sent = -1;   // send: its sender had handed the last byte to the kernel (replays and simulations only)
};

struct Timeline {
  std::string source;  // "run runs/x", "observed timings", "the profile's plan"
  std::size_t iterations = 0;
  // Job-wide durations, each from the end of the iteration before (its last
  // rank's), the first from its start; -1 unknown. Per rank likewise, from the
  // rank's own end of the iteration before.
  std::vector<Nanos> iteration;
  std::vector<std::vector<Nanos>> rank_iteration;  // [rank][iteration], empty if unknown
  std::vector<std::vector<Instance>> ops;  // [op][iteration]; empty if no op timings
  std::vector<Bytes> flow_bytes;  // [flow] over the whole run (0: unknown)
  std::vector<Nanos> flow_busy;   // [flow] time with a message in flight (0: unknown)
  std::vector<Nanos> planned;  // [op * iterations + it] planned start (replays only), -1 unknown
};

// A replay from its per-rank records (ranks[r]: the records of rank r, on one clock).
Timeline timeline_from_records(const Profile& profile, const std::vector<std::vector<Record>>& ranks, std::string source);

// A profile's observed timings. Ops and iterations not observed stay unknown.
Timeline timeline_from_observed(const Profile& profile);

// The profile's plan for a replay: every op at its planned start (as that replay
// recorded it) and every iteration at `iteration_bound` (the profile's lower bound).
Timeline timeline_from_plan(const Timeline& replay, Nanos iteration_bound);

// Multiplies every time by `f` (unknown stays unknown): a time-dilated run
// (`run --time-scale K`) is scaled back with f = 1/K.
void scale_timeline(Timeline& t, double f);

// Per-flow rate while busy, bits per second (0 when unknown).
double flow_rate_bps(const Timeline& t, FlowIndex flow);

}  // namespace tw

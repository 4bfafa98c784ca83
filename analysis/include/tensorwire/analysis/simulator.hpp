// A discrete-event simulation of a profile: every rank runs the same Executor the
// agents use, over a simple network model. It is the timing model a replay is
// held against (what the profile should take on a given link rate) and lets the
// executor's rules be tested without sockets or sleeping.
//
// Network model: each rank has one full-duplex link (`link_bps`, or a rate each way
// of its own in `links`). The messages crossing a link share it max-min fairly (as
// TCP flows roughly do), so a message alone takes bytes over the slower of its
// sender's egress and its receiver's ingress, and a server's link feeds several
// workers at once at its own rate. A flow's messages go one after another (the
// executor's rule). A message arrives `latency` after its last byte left and is
// handed to its receiver its flow's `read_lag` after that; a send completes for
// its sender when its transfer ends.
#pragma once

#include <vector>

#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {

struct SimOptions {
  double link_bps = 10e9;
  RankLinks links;  // per rank; empty: link_bps everywhere
  Nanos latency = 0;
  ExecutorOptions executor;  // applied to every rank
  std::vector<double> slowdown;  // per rank; empty: executor.slowdown for all
};

struct SimOpTiming {
  OpIndex op;
  std::uint32_t iteration;
  Nanos planned;
  Nanos start;
  Nanos end;  // compute end; send: the sender's completion
  Nanos received;  // send: arrival; -1 otherwise
};

struct SimResult {
  std::vector<std::vector<Executor::IterationTimes>> rank_iterations;  // per rank
  std::vector<Nanos> iteration_end;  // job-wide: when the last rank finished each iteration
  Nanos makespan = 0;
  std::vector<SimOpTiming> ops;  // every op instance, in start order

  // Job-wide: how long each iteration took, from the end of the one before.
  std::vector<Nanos> iteration_times() const;
};

// The plan of an open-loop replay: each op's start offset within an iteration and
// the iteration period. From the observed timings when the profile has them (the
// mean start of each op, the median iteration time), else from a simulated
// iteration at `link_bps`.
struct OpenLoopPlan {
  std::vector<Nanos> offsets;  // per op
  Nanos period = 0;
  std::string source;  // "observed" or "simulated at 10.00 Gb/s"
};
OpenLoopPlan open_loop_plan(const Profile& profile, double link_bps);

// Runs every iteration of the profile. Throws std::runtime_error if the ranks
// deadlock (an executor stops making progress before it finished), and
// std::invalid_argument if `links` is neither empty nor one entry per rank.
SimResult simulate(const Profile& profile, const SimOptions& options);

// A simulation as a timeline that `compare` can hold a replay against: iterations
// job-wide and per rank, each op's start (a send's ready) and end (a send's
// arrival), and each flow's bytes and busy time, measured the way a replay's are.
Timeline timeline_from_simulation(const Profile& profile, const SimResult& sim, std::string source);

}  // namespace tw

// The what-if simulator: a job-wide discrete-event simulation of a profile's
// rules (docs/profile-format.md, "Execution", closed loop) on a compact graph that
// analyses change freely: a rank's compute stretched or brought to its peers',
// a link's rate or cost per message, a tensor's bytes, the number of ranks.
//
// The agents' Executor holds one rank's state with arrays over every op of the
// profile, which is right for an agent and wrong for 1024 ranks at once; this
// engine keeps one state for the whole job, so memory and time grow with the ops
// and the events, not with ranks x ops. simulator.hpp (Executor-based) stays the
// reference: tests hold the two against each other.
//
// Network model: each flow moves one message at a time. A message holds its flow
// for `per_message` and then for its bits at the flow's rate, or less when ranks
// have links of their own (`rank_links`): then the messages crossing a rank's
// egress or ingress share it max-min fairly, each at most at its flow's rate. It
// arrives `latency` after its last bit left and is handed to its receiver its
// flow's `read_lag` after that; the send completes for its sender when its bits
// have left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_stats.hpp"
#include "tensorwire/core/sim_graph.hpp"

namespace tw {

// One op instance as simulated. Times are absolute (the job starts at 0).
struct SimInstance {
  Nanos ready = -1;  // its dependencies were met (and its iteration entered)
  Nanos dispatched = -1;  // its rank or flow took it up
  Nanos start = -1;  // compute started / the message took its flow (dispatched + its lag)
  Nanos end = -1;  // compute ended / the last bit left
  Nanos received = -1;  // send: handed to the receiver
  // What set `ready`: the completion of another instance (op, iteration, whether
  // its receipt), or kNoCause for the job's start. Drives the critical path.
  std::uint32_t cause_op = 0, cause_iteration = 0;
  bool cause_recv = false;
  bool has_cause = false;
  // Started later than ready + gap because its rank (compute) or flow (send) was
  // busy: the instance that held it until `start`.
  std::uint32_t held_op = 0, held_iteration = 0;
  bool held = false;
  // At `ready`: since when its rank (compute) or flow (send) had been free, or
  // -1 when it was busy then.
  Nanos idle_from = -1;
};

struct GraphSimOptions {
  bool record = false;  // keep every instance (SimRun::instances)
  std::uint64_t iterations = 0;  // 0: the graph's
};

struct GraphSimRun {
  std::vector<Nanos> iteration_end;  // job-wide: the last rank's end of each iteration
  std::vector<std::vector<Nanos>> rank_iteration_end;  // [rank][iteration]
  Nanos makespan = 0;
  std::uint64_t events = 0;  // processed (a message whose receipt is the instant it left is one)
  std::uint64_t iterations = 0;
  std::vector<SimInstance> instances;  // [op * iterations + iteration] when recorded

  const SimInstance& at(OpIndex op, std::uint64_t iteration) const { return instances[op * iterations + iteration]; }
  // Job-wide iteration times, each from the end of the one before.
  std::vector<Nanos> iteration_times() const;
  // The mean of iteration_times() from iteration `from` on (all when fewer).
  double mean_iteration(std::size_t from = 0) const;
};

// Throws std::runtime_error if the job deadlocks (naming a rank and what it waits
// for), std::invalid_argument for a graph that is not consistent.
// About the memory a simulation of g takes beside g, and a copy of g: what a
// what-if on its own copy of a graph holds (for how many to run at once).
std::size_t what_if_bytes(const SimGraph& g);

GraphSimRun simulate_graph(const SimGraph& graph, const GraphSimOptions& options = {});

}  // namespace tw

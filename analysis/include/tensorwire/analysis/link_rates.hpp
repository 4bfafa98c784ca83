// How fast each rank's link carried a replay's messages, read from its timeline:
// the rates that the timing model (the simulator) and the lower bound apply to a
// rank's whole egress and ingress. One flow's rate is not enough: a rank whose
// flows run side by side (a parameter server, any rank on loopback, where flows
// share no wire) moves its bytes faster than any one of its flows.
#pragma once

#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {

struct MeasuredLinks {
  // Per rank: its bytes out (in) over the time at least one of its outgoing
  // (incoming) messages was in flight, ready to arrival, summed over iterations.
  // What the timing model uses.
  RankLinks busy;
  // Per rank: the fastest any one iteration moved its bytes out (in) so. At these
  // rates a rank's bytes take no longer than they took in any iteration.
  RankLinks peak;
  // Per rank: the fastest any one of its messages went out (came in), bytes over
  // its own ready-to-arrival time. At these rates no message takes longer than it
  // took in any iteration, and so no chain of them does. With `peak`, this is
  // what makes the lower bound hold for the replay.
  RankLinks message;
  // Some message was timed. A rank with no timed message in a direction gets the
  // fastest rate measured anywhere, so every rate is > 0 when this is true.
  bool known = false;
};

// `replay`: a replay's timeline (op instances with start and end). A message's
// end is its delivery, `delay` (the emulated one-way latency) after its last
// byte arrived, so the link carried it until end - delay. Pure.
MeasuredLinks measure_links(const Profile& profile, const Timeline& replay, Nanos delay = 0);

// "3.10-9.87 Gb/s out, 9.80 Gb/s in": the range of a set of links, for a report.
std::string links_summary(const RankLinks& links);

}  // namespace tw

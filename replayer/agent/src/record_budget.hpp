// How many records an agent's run can push at most, so that its recorder's queue
// is never larger than the run: a queue sized up front is touched page by page when
// it is built (16 MiB, about 0.05 s of CPU per agent), which with hundreds of
// agents on a few cores is most of the set-up.
#pragma once

#include <cstdint>
#include <limits>

#include "tensorwire/core/profile.hpp"

namespace tw {

// Per iteration, what the agent pushes for rank `rank` of `p` (a profile or the
// rank's slice of it): one record per compute it runs and per message it receives,
// two per message it sends (the send and its transmit timestamps), one for the
// iteration, and one TCP_INFO sample per outgoing flow (at most one per iteration,
// the last one included). Saturates instead of overflowing.
inline std::uint64_t most_records(const Profile& p, RankId rank, std::uint64_t iterations) {
  std::uint64_t per_iteration = 1;
  for (const Op& op : p.ops) {
    if (op.type == OpType::compute) {
      per_iteration += op.rank == rank ? 1 : 0;
    } else if (op.flow < p.flows.size()) {
      per_iteration += (p.flows[op.flow].src == rank ? 2 : 0) + (p.flows[op.flow].dst == rank ? 1 : 0);
    }
  }
  for (const Flow& f : p.flows) per_iteration += f.src == rank ? 1 : 0;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  return iterations > kMax / per_iteration ? kMax : per_iteration * iterations;
}

}  // namespace tw

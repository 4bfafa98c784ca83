// Send priorities for the order hint: which message on a link should go first.
//
// The rule is critical path first, the classic list-scheduling rule: a send's
// urgency is the longest path from its start to the end of the next iteration
// through the profile's DAG (its own transfer, then everything that waits for
// it, across `@-K` dependencies into the iteration after). Sends with longer
// paths go first. For a job whose forward pass waits for each layer's own
// parameters this is the next forward's layer order, the order P3 and
// ByteScheduler send in; for a job with an iteration barrier it puts first what
// the rest of the iteration waits on longest.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/sim_graph.hpp"

namespace tw {

// Per op (0 for compute ops): the send's place in urgency order, 0 the most
// urgent, for Op::priority; sends of equal urgency share a place. Transfer times from `flows` (one model per flow; a
// flow without one is taken at 10 Gbit/s); compute from the ops' mean
// durations and gaps. Throws std::invalid_argument when the DAG has a cycle.
std::vector<std::uint32_t> urgency_priorities(const Profile& profile, const std::vector<FlowModel>& flows);

// Sets every send's priority from `priorities` (as urgency_priorities gives);
// returns how many sends' priorities changed.
std::size_t prioritize_sends(Profile& profile, const std::vector<std::uint32_t>& priorities);

}  // namespace tw

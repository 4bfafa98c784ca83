// What the agent of one rank needs of a profile: its own ops and the messages
// addressed to it, the flows it sends or receives on, every rank (their ids) and
// tensor. A controller sends each agent only its slice, so that the set-up
// traffic of a run grows with the profile, not with the profile times the ranks:
// a rank of a pipeline gets the same few lines whether it has 8 peers or 1000.
//
// A slice is a profile of its own (it loads, validates and executes for its rank
// exactly as the whole does): its ops and flows keep the whole profile's order;
// the messages of other ranks keep their id, flow, size and priority, not their
// dependencies, which are their sender's business. What crosses the agent's
// boundary (a frame's op and a hello's flow on the wire, a record's op and flow
// in a results file) is the whole profile's index: IndexMap translates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

struct ProfileSlice {
  Profile profile;
  std::vector<OpIndex> global;  // global[i]: the whole profile's index of the slice's op i, increasing
  std::vector<FlowIndex> flows;  // flows[i]: the whole profile's index of the slice's flow i, increasing
};

// Throws std::out_of_range if `rank` is not in the profile.
ProfileSlice slice_profile(const Profile& whole, RankId rank);

// What every rank's slice takes from the whole, found in one pass over it.
struct SliceParts {
  std::vector<OpIndex> members;  // its own ops and the messages to it, increasing
  std::vector<FlowIndex> flows;  // the flows it sends or receives on, increasing
};
std::vector<SliceParts> slice_parts(const Profile& whole);
// Whether a slice lists every rank of the whole (as an agent's must: a slice is
// a profile of its own) or none (the simulator's, which never reads them: every
// rank's slice would otherwise hold ranks x ranks entries).
enum class SliceRanks { all, none };
// The same from the rank's parts (slice_parts()[rank]): every rank's slice in
// time linear in the profile and its slices, not in the profile times the ranks.
ProfileSlice slice_profile(const Profile& whole, RankId rank, SliceParts parts, SliceRanks ranks = SliceRanks::all);

// A slice's op (or flow) indices as runs of consecutive indices {first, count}: what goes
// on the wire (a rank's ops are mostly contiguous).
using IndexRuns = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
IndexRuns index_runs(const std::vector<OpIndex>& global);
// Back from runs, checked before anything is allocated: increasing, within
// `whole_ops` (the whole profile's op count), `expected` indices in all.
// nullopt and `why` otherwise.
std::optional<std::vector<OpIndex>> indices_from_runs(const IndexRuns& runs, std::uint64_t expected, std::uint64_t whole_ops,
                                                      std::string& why);

// Op or flow indices between a slice and the whole profile; empty: the slice is
// the whole.
class IndexMap {
 public:
  IndexMap() = default;
  explicit IndexMap(std::vector<std::uint32_t> global) : global_(std::move(global)) {}
  bool identity() const { return global_.empty(); }
  std::uint32_t to_global(std::uint32_t local) const { return global_.empty() ? local : global_[local]; }
  // nullopt: the whole profile's op (flow) is not in the slice.
  std::optional<std::uint32_t> to_local(std::uint32_t global) const;
  const std::vector<std::uint32_t>& global() const { return global_; }

 private:
  std::vector<std::uint32_t> global_;
};

}  // namespace tw

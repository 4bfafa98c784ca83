// What the agent of one rank needs of a profile: its own ops and the messages
// addressed to it, with every rank, flow and tensor. A controller sends each
// agent only its slice, so that the set-up traffic of a run grows with the
// profile, not with the profile times the ranks.
//
// A slice is a profile of its own (it loads, validates and executes for its rank
// exactly as the whole does): its ops keep the whole profile's order; the
// messages of other ranks keep their id, flow, size and priority, not their
// dependencies, which are their sender's business. What crosses the agent's
// boundary (a frame's op on the wire, a record's op in a results file) is the
// whole profile's index: OpIndexMap translates.
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
};

// Throws std::out_of_range if `rank` is not in the profile.
ProfileSlice slice_profile(const Profile& whole, RankId rank);
// The same from the rank's members (slice_members()[rank]): every rank's slice
// in time linear in the profile and its slices, not in the profile times the ranks.
ProfileSlice slice_profile(const Profile& whole, RankId rank, std::vector<OpIndex> members);
// Each rank's ops in its slice, in one pass: its own and the messages to it.
std::vector<std::vector<OpIndex>> slice_members(const Profile& whole);

// A slice's op indices as runs of consecutive indices {first, count}: what goes
// on the wire (a rank's ops are mostly contiguous).
using IndexRuns = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
IndexRuns index_runs(const std::vector<OpIndex>& global);
// Back from runs, checked before anything is allocated: increasing, within
// `whole_ops` (the whole profile's op count), `expected` indices in all.
// nullopt and `why` otherwise.
std::optional<std::vector<OpIndex>> indices_from_runs(const IndexRuns& runs, std::uint64_t expected, std::uint64_t whole_ops,
                                                      std::string& why);

// Op indices between a slice and the whole profile; empty: the slice is the whole.
class OpIndexMap {
 public:
  OpIndexMap() = default;
  explicit OpIndexMap(std::vector<OpIndex> global) : global_(std::move(global)) {}
  bool identity() const { return global_.empty(); }
  OpIndex to_global(OpIndex local) const { return global_.empty() ? local : global_[local]; }
  // nullopt: the whole profile's op is not in the slice.
  std::optional<OpIndex> to_local(OpIndex global) const;
  const std::vector<OpIndex>& global() const { return global_; }

 private:
  std::vector<OpIndex> global_;
};

}  // namespace tw

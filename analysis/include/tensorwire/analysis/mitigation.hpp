// A changed profile that works around what the diagnosis found, with the gain the
// simulator predicts for it, for `tensorwire analyze --emit-mitigated OUT.yaml`;
// replaying OUT.yaml on the same hosts measures the real gain.
//
// - A named slow link in a ring (every rank sends to one rank and hears from one,
//   around one cycle): the ranks placed on the hosts in another order, so that no
//   two neighbours of the ring sit on the slow pair. Rank r of the profile runs on
//   host r (the testbed's and `--hosts`' order), so the new profile renames the
//   ranks: what rank r did, rank perm[r] does.
// - Otherwise the send order of the order hint (priority.hpp), when it saves at
//   least as much as compressing: it costs nothing and changes no tensor.
// - Otherwise the tensor whose compression saves most (the ranking's top at 4x):
//   its messages 4 times smaller, each send's gap longer by the compression cost.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensorwire/analysis/diagnosis.hpp"

namespace tw {

struct Mitigation {
  std::string kind;  // "reorder", "priority" or "compress"
  std::string description;
  Profile profile;
  Nanos predicted = 0;  // saving per iteration the simulator predicts
  Nanos before = 0, after = 0;  // the simulated iteration times it compares
  std::vector<RankId> perm;  // reorder: old rank -> new rank
};

// nullopt with `why` set when nothing helps (no named cause, no tensor saves
// anything, a slow pair that every ring order must use).
std::optional<Mitigation> mitigate(const DiagnosisInput& input, const Diagnosis& diagnosis, const DiagnosisOptions& options,
                                   std::string& why);

// Compresses the sends of one tensor (their `tensor` label, or their op id when
// they have none) k times: bytes divided by k (at least 1), and each send's gap
// longer by the compression cost, cost_ns_per_byte per uncompressed byte, paid at
// the sender before the message leaves. Returns how many sends changed.
std::size_t compress_sends(Profile& profile, const std::string& tensor, double k, double cost_ns_per_byte);

// The ring order of a profile: next[r] the one rank r sends to; empty when the
// profile is not a single ring.
std::vector<RankId> ring_next(const Profile& profile);

// The profile with rank r renamed perm[r] (ranks, flows, ops; ids unchanged).
Profile renamed_ranks(const Profile& profile, const std::vector<RankId>& perm);

}  // namespace tw

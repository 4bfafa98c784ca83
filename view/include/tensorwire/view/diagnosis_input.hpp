// What `tensorwire analyze` diagnoses, read from any source: a run directory (its
// records, hosts and the evidence of its transmit timestamps and TCP_INFO
// snapshots), a capture (one directory per host: the profile built from it, with
// the job's own timings), or a profile (its observed timings, or else its plan
// simulated at a given link rate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorwire/analysis/diagnosis.hpp"
#include "tensorwire/core/records.hpp"

namespace tw::view {

// A profile without observed timings has at most this many of its iterations
// simulated (a plan repeats itself).
inline constexpr std::uint64_t kPlanIterations = 100;

// Throws std::runtime_error naming the file that is missing or malformed.
DiagnosisInput diagnosis_input(const std::vector<std::string>& paths, double link_bps);

// Per flow, what a run's records say beyond the messages' times.
std::vector<FlowEvidence> flow_evidence(const Profile& profile, const std::vector<std::vector<Record>>& ranks);

}  // namespace tw::view

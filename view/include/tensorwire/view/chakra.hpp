// MLCommons Chakra execution traces of a job, for ASTRA-sim: one file per rank
// (PREFIX.R.et), each a GlobalMetadata and then one Node per op of an iteration,
// every message as a COMM_SEND_NODE on its sender and a COMM_RECV_NODE on its
// receiver (same comm_src, comm_dst, comm_size and comm_tag). Each is
// length-delimited by a varint, as Chakra's protoio writes them. Field numbers
// and attribute names are those of Chakra's schema/protobuf/et_def.proto and its
// trace feeder; docs/analysis.md ("Chakra") says what maps to what.
#pragma once

#include <string>
#include <vector>

#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw::view {

struct ChakraCounts {
  std::size_t files = 0, compute = 0, sends = 0, recvs = 0, dependencies = 0;
};

// Compute durations: each op's median over `measured` where it was timed, else
// the profile's. Writes PREFIX.0.et ... PREFIX.(N-1).et; throws std::runtime_error
// naming a file it cannot write.
ChakraCounts write_chakra(const Profile& profile, const Timeline& measured, const std::string& prefix);

}  // namespace tw::view

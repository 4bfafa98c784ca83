// A synthesised twin of a profile built from a capture of a data-parallel ring
// job (PyTorch DDP over Gloo), for the what-ifs that need the job's structure,
// which a built profile does not keep: its gradient buckets. The method and its
// limits are in docs/analysis.md ("Fusion hint").
#pragma once

#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/profile/model.hpp"
#include "tensorwire/profile/synth.hpp"

namespace tw {

struct DdpTwin {
  Model model;  // the gradients in pieces of a few hundred KiB, with their compute
  SynthOptions options;  // ring all-reduce at the inferred bucket sizes
  std::vector<Bytes> buckets;  // gradient bytes per bucket, in the order they became ready
  Bytes gradient_bytes = 0;  // all-reduced per iteration
  Nanos fwd = 0, bwd = 0;  // compute per iteration: the backward is twice the forward
  std::vector<RankId> ring;  // the ranks in the order the data goes round
  std::vector<FlowIndex> ring_flows;  // the profile's flows that carry it, ring[k] to ring[k + 1]
};

// The twin of a ring all-reduce profile: every rank a worker, each sending most
// of its bytes to one other rank, those flows one cycle through all ranks, and
// at least 80% of the profile's bytes on them. The buckets come from the
// segment sizes on each rank's ring flow (Gloo cuts a bucket into equal
// segments), in the order of their messages' place after the rank's largest
// compute op, agreed on by a majority of ranks; a bucket's gradient is the bytes
// sent less the ring's factor 2(n-1)/n. Returns nothing, with `why` saying what
// does not fit, for any other profile.
std::optional<DdpTwin> ddp_twin(const Profile& p, std::string& why);

// Sets the twin's forward compute per iteration and its backward to twice that,
// each spread over its tensors by bytes. The fusion hint fits the forward so
// that the twin at its own buckets takes the measured iteration time: a built
// profile's compute ops hold waits of the job's communication thread too, so
// they do not tell the model's compute.
void set_forward(DdpTwin& t, Nanos fwd);

}  // namespace tw

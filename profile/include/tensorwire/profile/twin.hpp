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
  Nanos fwd = 0, bwd = 0;  // compute per iteration: forward, and backward up to the last bucket
  std::vector<RankId> ring;  // the ranks in the order the data goes round
};

// The twin of a ring all-reduce profile: every rank a worker, each sending most
// of its bytes to one other rank, those flows one cycle through all ranks, and
// at least 80% of the profile's bytes on them. Each rank's ops are read in the
// profile's order (a built profile's: their median start): a compute op of at
// least 5% of the rank's compute starts a bucket, whose gradient is the bytes
// the rank then sends on its ring flow, less the ring's factor 2(n-1)/n. Ranks
// vote on the bucket count; each bucket takes the median rank's bytes and
// compute. Returns nothing, with `why` saying what does not fit, for any other
// profile.
std::optional<DdpTwin> ddp_twin(const Profile& p, std::string& why);

// Sets the twin's forward compute per iteration, spread over its tensors by bytes.
// The fusion hint fits it so that the twin at its own buckets takes the measured
// iteration time: the compute ops of a built profile include waits of the job's
// communication thread, so their sum overstates what the twin's forward holds.
void set_forward(DdpTwin& t, Nanos fwd);

}  // namespace tw

// Synthetic traffic profiles from a model's tensor list and a communication
// pattern. The patterns and their modelling choices are documented in
// docs/profile-format.md ("Synthetic profiles").
#pragma once

#include <optional>
#include <string>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/sim_graph.hpp"
#include "tensorwire/profile/model.hpp"

namespace tw {

enum class Pattern { ring_allreduce, parameter_server };

// "ring-allreduce" or "ps"; throws std::invalid_argument otherwise.
Pattern parse_pattern(const std::string& name);
const char* pattern_name(Pattern p);

struct SynthOptions {
  Pattern pattern = Pattern::ring_allreduce;
  std::uint32_t ranks = 4;  // ranks of the ring, or workers of the PS
  std::uint32_t servers = 1;  // PS only
  std::uint64_t iterations = 10;
  Bytes bucket_bytes = 25 * kMiB;  // DDP bucket_cap_mb
  Bytes first_bucket_bytes = 1 * kMiB;  // DDP's first bucket
  Bytes max_segment_bytes = 1 * kMiB;  // Gloo ring segment limit
  Bytes partition_bytes = 4 * kMiB;  // PS: tensors above this are split into keys
  double aggregate_bytes_per_s = 10e9;  // PS server summing rate
  std::optional<Nanos> fwd;  // total per iteration; default: the model's
  std::optional<Nanos> bwd;
  Nanos optimizer = 0;  // per-iteration optimizer step on each worker; 0: none
  // PS: no iteration barrier; each layer's forward waits for its own tensors'
  // pulls of the iteration before (BytePS, P3), so that the order of the sends
  // on a link decides how soon the next forward can go.
  bool overlap_forward = false;
};

// DDP's bucket assignment (steady state, after the first iteration's rebuild):
// tensors in gradient-ready order (reverse registration), a bucket closes once it
// holds at least its limit: first_bucket_bytes for the first, bucket_bytes after.
// Returns tensor indices per bucket, in the order buckets become ready.
std::vector<std::vector<std::size_t>> ddp_buckets(const Model& model, Bytes first_bucket_bytes, Bytes bucket_bytes);

// Gloo's ring all-reduce segmentation of `bytes` over `ranks`: the number of
// segments is a multiple of ranks, at least 2 x ranks, and enough for segments of
// at most max_segment bytes; the segments are equal, in whole elements. Returns
// the segment sizes (the last ones may be smaller, or zero).
std::vector<Bytes> ring_segments(Bytes bytes, std::uint32_t ranks, Bytes max_segment, std::size_t element_size);

// Throws std::invalid_argument naming the bad option.
Profile synthesize(const Model& model, const SynthOptions& options);

// The same job as a compact graph for the what-if simulator, every flow at
// `link`: no op ids or labels are made, so that a 1024-rank ring of ResNet-50
// (some 21 million messages an iteration) fits. Throws as synthesize().
SimGraph synthesize_graph(const Model& model, const SynthOptions& options, const FlowModel& link);

}  // namespace tw

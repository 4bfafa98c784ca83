// Shared machinery of the synthesisers: appending ranks, flows and ops to a
// profile, and the per-worker forward/backward compute chain.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/profile/model.hpp"
#include "tensorwire/profile/synth.hpp"

namespace tw::synth {

class Builder {
 public:
  explicit Builder(Profile& p) : p_(p) {}

  RankId add_rank(Role role);
  // The flow src -> dst, created on first use with id "r<src>-r<dst>".
  FlowIndex flow(RankId src, RankId dst);
  OpIndex compute(RankId rank, std::string id, Nanos duration, std::vector<Dependency> after);
  OpIndex send(FlowIndex flow, std::string id, Bytes bytes, std::string tensor, std::vector<Dependency> after);

 private:
  Profile& p_;
  std::map<std::pair<RankId, RankId>, FlowIndex> flows_;
};

inline Dependency local(OpIndex op) { return {op, false, 0}; }
inline Dependency received(OpIndex op) { return {op, true, 0}; }

// Per-layer forward and backward times: the model's measured ones when it gives
// them, else the totals split in proportion to layer size (at least 1 ns each).
struct LayerTimes {
  std::vector<Nanos> fwd;
  std::vector<Nanos> bwd;
};
LayerTimes layer_times(const Model& model, const std::vector<Layer>& layers, const SynthOptions& o);

// Forward ops in layer order, then backward ops in reverse, chained on `rank`.
// Returns the backward op of each layer (indexed by layer).
std::vector<OpIndex> compute_chain(Builder& b, RankId rank, const std::vector<Layer>& layers, const LayerTimes& t);

// Op ids are built from tensor and layer names: keep them within the id alphabet.
std::string sanitize(const std::string& name);

// The layer of each tensor.
std::vector<std::size_t> layer_of_tensors(const Model& model, const std::vector<Layer>& layers);

Profile ring_allreduce(const Model& model, const SynthOptions& o);
Profile parameter_server(const Model& model, const SynthOptions& o);

}  // namespace tw::synth

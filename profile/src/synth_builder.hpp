// Shared machinery of the synthesisers: appending ranks, flows and ops to a
// profile, and the per-worker forward/backward compute chain.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/sim_graph.hpp"
#include "tensorwire/profile/model.hpp"
#include "tensorwire/profile/synth.hpp"

namespace tw::synth {

// Appends to a profile, or (with `graph`) only its ranks and flows to the
// profile and the ops to the compact graph: then op ids (`id`, called only for a
// profile) and tensor labels are not made, so that thousands of ranks fit. With
// `count`, the ops go nowhere and *count counts them: a pattern is run so first,
// and refused at the cap before a profile of millions of ops is allocated.
class Builder {
 public:
  explicit Builder(Profile& p, SimGraph* graph = nullptr, std::size_t* count = nullptr) : p_(p), g_(graph), count_(count) {}

  RankId add_rank(Role role);
  // The flow src -> dst, created on first use with id "r<src>-r<dst>".
  FlowIndex flow(RankId src, RankId dst);
  template <typename Id>
  OpIndex compute(RankId rank, const Id& id, Nanos duration, const std::vector<Dependency>& after) {
    if (count_) return counted();
    return g_ ? node(OpType::compute, rank, 0, 0, duration, after) : add_compute(rank, id(), duration, after);
  }
  template <typename Id>
  OpIndex send(FlowIndex flow, const Id& id, Bytes bytes, const std::string& tensor, const std::vector<Dependency>& after) {
    if (count_) return counted();
    return g_ ? node(OpType::send, p_.flows[flow].src, flow, bytes, 0, after) : add_send(flow, id(), bytes, tensor, after);
  }
  // Op `op` also waits for `deps`.
  void add_after(OpIndex op, const std::vector<Dependency>& deps);

  // The most ops of a graph made to simulate (a few GB with their dependencies).
  static constexpr std::size_t kMostGraphOps = 32'000'000;

 private:
  void check_room() const;
  OpIndex counted();
  OpIndex add_compute(RankId rank, std::string id, Nanos duration, const std::vector<Dependency>& after);
  OpIndex add_send(FlowIndex flow, std::string id, Bytes bytes, const std::string& tensor, const std::vector<Dependency>& after);
  OpIndex node(OpType type, RankId rank, FlowIndex flow, Bytes bytes, Nanos duration, const std::vector<Dependency>& after);

  Profile& p_;
  SimGraph* g_;
  std::size_t* count_;
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
// Returns the backward op of each layer (indexed by layer); `fwd`, if given, gets
// the forward ones.
std::vector<OpIndex> compute_chain(Builder& b, RankId rank, const std::vector<Layer>& layers, const LayerTimes& t,
                                   std::vector<OpIndex>* fwd = nullptr);

// Op ids are built from tensor and layer names: keep them within the id alphabet.
std::string sanitize(const std::string& name);

// The layer of each tensor.
std::vector<std::size_t> layer_of_tensors(const Model& model, const std::vector<Layer>& layers);

// With `graph`, the ops go there and the profile keeps ranks and flows only; with
// `count`, nowhere (Builder).
Profile ring_allreduce(const Model& model, const SynthOptions& o, SimGraph* graph = nullptr, std::size_t* count = nullptr);
Profile parameter_server(const Model& model, const SynthOptions& o, SimGraph* graph = nullptr, std::size_t* count = nullptr);

}  // namespace tw::synth

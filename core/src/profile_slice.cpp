#include "tensorwire/core/profile_slice.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tw {

std::vector<SliceParts> slice_parts(const Profile& whole) {
  std::vector<SliceParts> parts(whole.ranks.size());
  for (std::size_t i = 0; i < whole.ops.size(); ++i) {
    const Op& op = whole.ops[i];
    if (op.rank < parts.size()) parts[op.rank].members.push_back(static_cast<OpIndex>(i));
    if (op.type == OpType::send) {
      const RankId dst = whole.flows[op.flow].dst;
      if (dst != op.rank && dst < parts.size()) parts[dst].members.push_back(static_cast<OpIndex>(i));
    }
  }
  for (std::size_t f = 0; f < whole.flows.size(); ++f) {
    const Flow& flow = whole.flows[f];
    if (flow.src < parts.size()) parts[flow.src].flows.push_back(static_cast<FlowIndex>(f));
    if (flow.dst != flow.src && flow.dst < parts.size()) parts[flow.dst].flows.push_back(static_cast<FlowIndex>(f));
  }
  return parts;
}

ProfileSlice slice_profile(const Profile& whole, RankId rank) {
  if (rank >= whole.ranks.size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is not in the profile (" + std::to_string(whole.ranks.size()) +
                            " ranks)");
  }
  SliceParts parts;
  for (std::size_t i = 0; i < whole.ops.size(); ++i) {
    const Op& op = whole.ops[i];
    if (op.rank == rank || (op.type == OpType::send && whole.flows[op.flow].dst == rank)) parts.members.push_back(static_cast<OpIndex>(i));
  }
  for (std::size_t f = 0; f < whole.flows.size(); ++f) {
    if (whole.flows[f].src == rank || whole.flows[f].dst == rank) parts.flows.push_back(static_cast<FlowIndex>(f));
  }
  return slice_profile(whole, rank, std::move(parts));
}

ProfileSlice slice_profile(const Profile& whole, RankId rank, SliceParts parts, SliceRanks ranks) {
  if (rank >= whole.ranks.size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is not in the profile (" + std::to_string(whole.ranks.size()) +
                            " ranks)");
  }
  ProfileSlice s;
  Profile& p = s.profile;
  p.version = whole.version;
  p.metadata = whole.metadata;
  p.iterations = whole.iterations;
  p.iteration_barrier = whole.iteration_barrier;
  if (ranks == SliceRanks::all) p.ranks = whole.ranks;
  p.tensors = whole.tensors;
  // The flows the rank sends or receives on; the others are its peers' business.
  s.flows = std::move(parts.flows);
  p.flows.reserve(s.flows.size());
  for (const FlowIndex f : s.flows) p.flows.push_back(whole.flows[f]);
  const auto local_flow = [&](FlowIndex f) {
    const auto it = std::lower_bound(s.flows.begin(), s.flows.end(), f);
    if (it == s.flows.end() || *it != f) throw std::logic_error("rank " + std::to_string(rank) + "'s slice misses flow " + whole.flows[f].id);
    return static_cast<FlowIndex>(it - s.flows.begin());
  };
  s.global = std::move(parts.members);
  p.ops.reserve(s.global.size());
  for (const OpIndex g : s.global) {
    const Op& op = whole.ops[g];
    if (op.rank == rank) {
      p.ops.push_back(op);
      if (op.type == OpType::send) p.ops.back().flow = local_flow(op.flow);
      continue;
    }
    // Another rank's message to this one: what its receipt needs.
    Op m;
    m.id = op.id;
    m.type = op.type;
    m.rank = op.rank;
    m.flow = local_flow(op.flow);
    m.bytes = op.bytes;
    m.tensor = op.tensor;
    m.priority = op.priority;
    p.ops.push_back(std::move(m));
  }
  // An own op depends on own ops and on messages to this rank only (the
  // loader's rule), all of them in the slice.
  const IndexMap map(s.global);
  for (Op& op : p.ops) {
    for (Dependency& d : op.after) {
      const auto local = map.to_local(d.op);
      if (!local) throw std::logic_error("op " + op.id + " depends on an op outside its rank's slice");
      d.op = *local;
    }
  }
  p.index();
  return s;
}

IndexRuns index_runs(const std::vector<OpIndex>& global) {
  IndexRuns runs;
  for (const OpIndex g : global) {
    if (!runs.empty() && runs.back().first + runs.back().second == g) {
      ++runs.back().second;
    } else {
      runs.push_back({g, 1});
    }
  }
  return runs;
}

std::optional<std::vector<OpIndex>> indices_from_runs(const IndexRuns& runs, std::uint64_t expected, std::uint64_t whole_ops,
                                                      std::string& why) {
  if (whole_ops > limits::kMaxOps || expected > whole_ops) {
    why = "a slice of " + std::to_string(expected) + " ops of a profile of " + std::to_string(whole_ops);
    return std::nullopt;
  }
  std::uint64_t total = 0, next = 0;
  for (const auto& [first, count] : runs) {
    if (count == 0 || first < next || first > whole_ops || count > whole_ops - first) {
      why = "op indices [" + std::to_string(first) + ", +" + std::to_string(count) + ") out of order or beyond the profile's " +
            std::to_string(whole_ops) + " ops";
      return std::nullopt;
    }
    next = first + count;
    total += count;
  }
  if (total != expected) {
    why = std::to_string(total) + " op indices for a slice of " + std::to_string(expected) + " ops";
    return std::nullopt;
  }
  std::vector<OpIndex> out;
  out.reserve(total);
  for (const auto& [first, count] : runs) {
    for (std::uint64_t k = 0; k < count; ++k) out.push_back(static_cast<OpIndex>(first + k));
  }
  return out;
}

std::optional<std::uint32_t> IndexMap::to_local(std::uint32_t global) const {
  if (global_.empty()) return global;
  const auto it = std::lower_bound(global_.begin(), global_.end(), global);
  if (it == global_.end() || *it != global) return std::nullopt;
  return static_cast<std::uint32_t>(it - global_.begin());
}

}  // namespace tw

#include <algorithm>
#include <stdexcept>

#include "synth_builder.hpp"
#include "tensorwire/core/yaml_reader.hpp"

namespace tw {

// 128-bit intermediates keep scaled arithmetic exact (a GCC/Clang extension).
__extension__ typedef unsigned __int128 U128;

Pattern parse_pattern(const std::string& name) {
  if (name == "ring-allreduce" || name == "ring") return Pattern::ring_allreduce;
  if (name == "ps" || name == "parameter-server") return Pattern::parameter_server;
  throw std::invalid_argument("unknown pattern '" + name + "': use ring-allreduce or ps");
}

const char* pattern_name(Pattern p) { return p == Pattern::ring_allreduce ? "ring-allreduce" : "ps"; }

namespace {
void check_options(const Model& model, const SynthOptions& o) {
  if (model.tensors.empty()) throw std::invalid_argument("model '" + model.name + "' has no tensors");
  if (o.iterations == 0 || o.iterations > limits::kMaxIterations) {
    throw std::invalid_argument("--iterations must be from 1 to " + std::to_string(limits::kMaxIterations));
  }
  if (o.fwd && (*o.fwd <= 0 || *o.fwd > limits::kMaxDuration)) throw std::invalid_argument("--fwd-ms must be positive and at most an hour");
  if (o.bwd && (*o.bwd <= 0 || *o.bwd > limits::kMaxDuration)) throw std::invalid_argument("--bwd-ms must be positive and at most an hour");
  if (o.optimizer < 0 || o.optimizer > limits::kMaxDuration) throw std::invalid_argument("--optimizer-ms must be zero or more and at most an hour");
  if (!o.fwd && model.fwd <= 0) throw std::invalid_argument("model '" + model.name + "' gives no forward time: pass --fwd-ms");
  if (!o.bwd && model.bwd <= 0) throw std::invalid_argument("model '" + model.name + "' gives no backward time: pass --bwd-ms");
}
}  // namespace

Profile synthesize(const Model& model, const SynthOptions& o) {
  check_options(model, o);
  const auto pattern = o.pattern == Pattern::ring_allreduce ? synth::ring_allreduce : synth::parameter_server;
  // Counted first: an op of a profile costs a few hundred bytes, and a pattern
  // refused at the cap had taken 4 GB by then.
  std::size_t ops = 0;
  pattern(model, o, nullptr, &ops);
  return pattern(model, o, nullptr, nullptr);
}

SimGraph synthesize_graph(const Model& model, const SynthOptions& o, const FlowModel& link) {
  check_options(model, o);
  SimGraph g;
  const Profile p = o.pattern == Pattern::ring_allreduce ? synth::ring_allreduce(model, o, &g) : synth::parameter_server(model, o, &g);
  g.ranks = static_cast<std::uint32_t>(p.ranks.size());
  g.iterations = p.iterations;
  g.barrier = p.iteration_barrier;
  g.flows.assign(p.flows.size(), link);
  for (const Flow& f : p.flows) g.flow_src.push_back(f.src), g.flow_dst.push_back(f.dst);
  return g;
}

namespace synth {

RankId Builder::add_rank(Role role) {
  const auto id = static_cast<RankId>(p_.ranks.size());
  p_.ranks.push_back({id, "", role});
  return id;
}

FlowIndex Builder::flow(RankId src, RankId dst) {
  const auto [it, added] = flows_.try_emplace({src, dst}, static_cast<FlowIndex>(p_.flows.size()));
  if (added) p_.flows.push_back({"r" + std::to_string(src) + "-r" + std::to_string(dst), src, dst});
  return it->second;
}

OpIndex Builder::node(OpType type, RankId rank, FlowIndex flow, Bytes bytes, Nanos duration, const std::vector<Dependency>& after) {
  check_room();
  SimGraph::Node n;
  n.type = type;
  n.rank = rank;
  n.flow = flow;
  n.bytes = bytes;
  n.dep_begin = static_cast<std::uint32_t>(g_->deps.size());
  n.dep_count = static_cast<std::uint32_t>(after.size());
  g_->deps.insert(g_->deps.end(), after.begin(), after.end());
  if (type == OpType::compute) {
    n.dur_begin = static_cast<std::uint32_t>(g_->durations.size());
    n.dur_count = 1;
    g_->durations.push_back(duration);
  }
  g_->ops.push_back(n);
  return static_cast<OpIndex>(g_->ops.size() - 1);
}

OpIndex Builder::counted() {
  check_room();
  return static_cast<OpIndex>((*count_)++);
}

void Builder::add_after(OpIndex op, const std::vector<Dependency>& deps) {
  if (deps.empty() || count_) return;
  if (!g_) {
    p_.ops[op].after.insert(p_.ops[op].after.end(), deps.begin(), deps.end());
    return;
  }
  // The node's dependencies move to the end of the table, with deps after them.
  SimGraph::Node& n = g_->ops[op];
  const auto begin = static_cast<std::uint32_t>(g_->deps.size());
  for (std::uint32_t k = 0; k < n.dep_count; ++k) g_->deps.push_back(g_->deps[n.dep_begin + k]);
  g_->deps.insert(g_->deps.end(), deps.begin(), deps.end());
  n.dep_begin = begin;
  n.dep_count += static_cast<std::uint32_t>(deps.size());
}

// Checked before each op is added: a pattern's op count grows with the square of
// its ranks (a ring of 4096 ranks of ResNet-50), or with its segments (a tiny
// --segment-kib), and ran out of memory (std::bad_alloc, or 24 GB and counting)
// before any check of the result could refuse it.
void Builder::check_room() const {
  const std::size_t ops = count_ ? *count_ : g_ ? g_->ops.size() : p_.ops.size();
  const std::size_t most = g_ ? kMostGraphOps : limits::kMaxOps;
  if (ops >= most) {
    throw std::invalid_argument("the pattern makes more than " + std::to_string(most) + " ops" +
                                (g_ ? " to simulate" : " (the most a profile may hold)") + " at " + std::to_string(p_.ranks.size()) +
                                " ranks: fewer ranks, or larger segments (--segment-kib)");
  }
}

OpIndex Builder::add_compute(RankId rank, std::string id, Nanos duration, const std::vector<Dependency>& after) {
  check_room();
  Op op;
  op.id = std::move(id);
  op.type = OpType::compute;
  op.rank = rank;
  op.duration = duration;
  op.after = after;
  p_.ops.push_back(std::move(op));
  return static_cast<OpIndex>(p_.ops.size() - 1);
}

OpIndex Builder::add_send(FlowIndex flow, std::string id, Bytes bytes, const std::string& tensor, const std::vector<Dependency>& after) {
  check_room();
  Op op;
  op.id = std::move(id);
  op.type = OpType::send;
  op.flow = flow;
  op.rank = p_.flows[flow].src;
  op.bytes = bytes;
  op.tensor = tensor;
  op.after = after;
  p_.ops.push_back(std::move(op));
  return static_cast<OpIndex>(p_.ops.size() - 1);
}

std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!valid_id(std::string_view(&c, 1))) c = '_';
  }
  return out.substr(0, 200);
}

std::vector<std::size_t> layer_of_tensors(const Model& model, const std::vector<Layer>& layers) {
  std::vector<std::size_t> out(model.tensors.size(), 0);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    for (std::size_t i = 0; i < layers[l].count; ++i) out[layers[l].first + i] = l;
  }
  return out;
}

namespace {
// Splits `total` over layers in proportion to their bytes; cumulative rounding
// keeps the sum exact before the 1 ns floor.
std::vector<Nanos> proportional(Nanos total, const std::vector<Layer>& layers) {
  Bytes all = 0;
  for (const auto& l : layers) all += l.bytes;
  std::vector<Nanos> out;
  out.reserve(layers.size());
  Bytes cumulative = 0;
  Nanos given = 0;
  for (const auto& l : layers) {
    cumulative += l.bytes;
    const auto upto = static_cast<Nanos>(static_cast<U128>(total) * cumulative / (all == 0 ? 1 : all));
    out.push_back(std::max<Nanos>(1, upto - given));
    given = upto;
  }
  return out;
}
}  // namespace

LayerTimes layer_times(const Model& model, const std::vector<Layer>& layers, const SynthOptions& o) {
  LayerTimes t;
  const bool measured = !model.tensors.empty() && model.tensors.front().fwd.has_value();
  if (measured && !o.fwd && !o.bwd) {
    for (const auto& l : layers) {
      Nanos f = 0, b = 0;
      for (std::size_t i = 0; i < l.count; ++i) {
        f += *model.tensors[l.first + i].fwd;
        b += *model.tensors[l.first + i].bwd;
      }
      t.fwd.push_back(std::max<Nanos>(1, f));
      t.bwd.push_back(std::max<Nanos>(1, b));
    }
    return t;
  }
  t.fwd = proportional(o.fwd.value_or(model.fwd), layers);
  t.bwd = proportional(o.bwd.value_or(model.bwd), layers);
  return t;
}

std::vector<OpIndex> compute_chain(Builder& b, RankId rank, const std::vector<Layer>& layers, const LayerTimes& t,
                                   std::vector<OpIndex>* fwd) {
  const std::string prefix = "r" + std::to_string(rank) + ".";
  std::vector<Dependency> prev;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const OpIndex op = b.compute(rank, [&] { return prefix + "fwd." + sanitize(layers[l].name); }, t.fwd[l], prev);
    if (fwd) fwd->push_back(op);
    prev = {local(op)};
  }
  std::vector<OpIndex> bwd(layers.size(), 0);
  for (std::size_t l = layers.size(); l-- > 0;) {
    bwd[l] = b.compute(rank, [&] { return prefix + "bwd." + sanitize(layers[l].name); }, t.bwd[l], prev);
    prev = {local(bwd[l])};
  }
  return bwd;
}

}  // namespace synth
}  // namespace tw

// Parameter server (BytePS / MXNet KVStore style): workers push each gradient
// partition to its server as backward produces it; the server aggregates once all
// workers' pushes of that key arrived, then every worker pulls the result.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "synth_builder.hpp"

namespace tw::synth {

Profile parameter_server(const Model& model, const SynthOptions& o, SimGraph* graph, std::size_t* count) {
  const std::uint32_t w = o.ranks;
  const std::uint32_t s = o.servers;
  if (w < 1 || w > 4096) throw std::invalid_argument("the parameter server needs --ranks (workers) from 1 to 4096");
  if (s < 1 || s > 4096) throw std::invalid_argument("the parameter server needs --servers from 1 to 4096");
  if (o.partition_bytes == 0) throw std::invalid_argument("the partition size must be positive");
  if (!(o.aggregate_bytes_per_s > 0)) throw std::invalid_argument("the aggregation rate must be positive");

  Profile p;
  p.iterations = o.iterations;
  p.metadata.source = "synth";
  p.metadata.framework = "parameter-server";
  p.metadata.pattern = pattern_name(Pattern::parameter_server);
  p.metadata.model = model.name;
  p.metadata.description = model.name + " data-parallel with " + std::to_string(w) + " workers and " +
                           std::to_string(s) + " servers, tensors partitioned at " + human_bytes(o.partition_bytes) +
                           ", push then pull per key";
  Builder b(p, graph, count);
  for (std::uint32_t i = 0; i < w; ++i) b.add_rank(Role::worker);
  for (std::uint32_t i = 0; i < s; ++i) b.add_rank(Role::server);
  for (const auto& t : model.tensors) p.tensors.push_back({t.name, t.bytes, "", t.dtype});

  const auto layers = model.layers();
  const auto layer_of = layer_of_tensors(model, layers);
  const LayerTimes times = layer_times(model, layers, o);
  std::vector<std::vector<OpIndex>> bwd(w), fwd(w);
  for (std::uint32_t r = 0; r < w; ++r) bwd[r] = compute_chain(b, r, layers, times, &fwd[r]);
  if (o.overlap_forward) {
    p.iteration_barrier = false;
    p.metadata.description += "; each layer's forward waits for its own pulls of the iteration before";
  }

  // Keys in gradient-ready order; each goes to the server with the fewest bytes so far.
  std::vector<Bytes> load(s, 0);
  std::vector<std::vector<Dependency>> pulled(w);
  // --overlap-forward: per worker and layer, the pulls its forward waits for.
  std::vector<std::vector<std::vector<Dependency>>> forward_needs(w, std::vector<std::vector<Dependency>>(o.overlap_forward ? layers.size() : 0));
  for (std::size_t i = model.tensors.size(); i-- > 0;) {
    const auto& t = model.tensors[i];
    const Bytes parts = (t.bytes + o.partition_bytes - 1) / o.partition_bytes;
    for (Bytes part = 0; part < parts; ++part) {
      const Bytes bytes = std::min(o.partition_bytes, t.bytes - part * o.partition_bytes);
      const std::string key = sanitize(t.name) + (parts > 1 ? ".p" + std::to_string(part) : "");
      const auto server_index = static_cast<std::uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
      load[server_index] += bytes;
      const RankId server = w + server_index;

      std::vector<Dependency> pushes;
      for (RankId r = 0; r < w; ++r) {
        const OpIndex push = b.send(b.flow(r, server), [&] { return "r" + std::to_string(r) + ".push." + key; }, bytes, t.name,
                                    {local(bwd[r][layer_of[i]])});
        pushes.push_back(received(push));
      }
      const double seconds = static_cast<double>(bytes) * w / o.aggregate_bytes_per_s;
      const auto agg_time = std::max<Nanos>(1, static_cast<Nanos>(std::llround(seconds * 1e9)));
      const OpIndex agg = b.compute(server, [&] { return "r" + std::to_string(server) + ".agg." + key; }, agg_time, pushes);
      for (RankId r = 0; r < w; ++r) {
        const OpIndex pull = b.send(b.flow(server, r), [&] { return "r" + std::to_string(server) + ".pull." + key + ".r" + std::to_string(r); },
                                    bytes, t.name, {local(agg)});
        pulled[r].push_back(received(pull));
        if (o.overlap_forward) forward_needs[r][layer_of[i]].push_back({pull, true, 1});
      }
    }
  }
  for (RankId r = 0; r < w; ++r) {
    for (std::size_t l = 0; l < forward_needs[r].size(); ++l) b.add_after(fwd[r][l], forward_needs[r][l]);
  }
  if (o.optimizer > 0) {
    for (RankId r = 0; r < w; ++r) {
      std::vector<Dependency> after = std::move(pulled[r]);
      after.push_back(local(bwd[r].front()));
      b.compute(r, [&] { return "r" + std::to_string(r) + ".opt"; }, o.optimizer, after);
    }
  }
  if (!graph) p.index();
  return p;
}

}  // namespace tw::synth

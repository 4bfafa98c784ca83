// PyTorch DDP over Gloo: gradient buckets all-reduced around a ring.
#include <algorithm>
#include <stdexcept>

#include "synth_builder.hpp"
#include "tensorwire/util/heap.hpp"

namespace tw {

std::vector<std::vector<std::size_t>> ddp_buckets(const Model& model, Bytes first_bucket_bytes, Bytes bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> current;
  Bytes size = 0;
  Bytes limit = first_bucket_bytes;
  for (std::size_t i = model.tensors.size(); i-- > 0;) {
    current.push_back(i);
    size += model.tensors[i].bytes;
    if (size >= limit) {
      buckets.push_back(std::move(current));
      current.clear();
      size = 0;
      limit = bucket_bytes;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

std::vector<Bytes> ring_segments(Bytes bytes, std::uint32_t ranks, Bytes max_segment, std::size_t element_size) {
  const auto round_up = [](Bytes v, Bytes m) { return v % m == 0 ? v : v + m - v % m; };
  const Bytes n = ranks;
  const Bytes elem = element_size == 0 ? 1 : element_size;
  // As Gloo's ring: first the number of segments (enough for max_segment, at least
  // two per rank, a multiple of the ranks), then equal segments in whole elements.
  const Bytes max_seg = std::max(elem, max_segment / elem * elem);
  const Bytes count = round_up(std::max((bytes + max_seg - 1) / max_seg, 2 * n), n);
  const Bytes segment = round_up((bytes + count - 1) / count, elem);
  std::vector<Bytes> out(count, 0);
  for (Bytes j = 0; j < count; ++j) {
    const Bytes begin = j * segment;
    out[j] = begin >= bytes ? 0 : std::min(segment, bytes - begin);
  }
  return out;
}

namespace synth {

Profile ring_allreduce(const Model& model, const SynthOptions& o, SimGraph* graph, std::size_t* count) {
  const std::uint32_t n = o.ranks;
  if (n < 2 || n > 4096) throw std::invalid_argument("ring all-reduce needs --ranks from 2 to 4096");
  if (o.bucket_bytes == 0 || o.first_bucket_bytes == 0) throw std::invalid_argument("bucket sizes must be positive");
  if (o.max_segment_bytes == 0) throw std::invalid_argument("the segment size must be positive");

  Profile p;
  p.iterations = o.iterations;
  p.metadata.source = "synth";
  p.metadata.framework = "pytorch-ddp-gloo";
  p.metadata.pattern = pattern_name(Pattern::ring_allreduce);
  p.metadata.model = model.name;
  p.metadata.description = model.name + " data-parallel over " + std::to_string(n) + " ranks, DDP buckets " +
                           human_bytes(o.first_bucket_bytes) + " then " + human_bytes(o.bucket_bytes) +
                           ", Gloo ring all-reduce (reduce-scatter + all-gather) in segments of at most " +
                           human_bytes(o.max_segment_bytes);
  Builder b(p, graph, count);
  for (std::uint32_t r = 0; r < n; ++r) b.add_rank(Role::worker);
  std::vector<FlowIndex> right(n);
  for (std::uint32_t r = 0; r < n; ++r) right[r] = b.flow(r, (r + 1) % n);

  const auto layers = model.layers();
  const auto layer_of = layer_of_tensors(model, layers);
  const auto buckets = ddp_buckets(model, o.first_bucket_bytes, o.bucket_bytes);
  std::vector<std::size_t> bucket_of(model.tensors.size(), 0);
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    for (std::size_t i : buckets[k]) bucket_of[i] = k;
  }
  for (std::size_t i = 0; i < model.tensors.size(); ++i) {
    const auto& t = model.tensors[i];
    p.tensors.push_back({t.name, t.bytes, "bucket" + std::to_string(bucket_of[i]), t.dtype});
  }

  const LayerTimes times = layer_times(model, layers, o);
  std::vector<std::vector<OpIndex>> bwd(n);
  for (std::uint32_t r = 0; r < n; ++r) bwd[r] = compute_chain(b, r, layers, times);

  const std::size_t element = dtype_size(model.dtype);
  if (graph) {
    // Millions of sends at scale: make room once.
    std::size_t sends = 0;
    for (const auto& bucket : buckets) {
      Bytes bytes = 0;
      for (std::size_t i : bucket) bytes += model.tensors[i].bytes;
      sends += ring_segments(bytes, n, o.max_segment_bytes, element).size() * 2 * (n - 1);
    }
    reserve_huge(graph->ops, graph->ops.size() + sends);
    reserve_huge(graph->deps, graph->deps.size() + sends);
  }
  // gathered[r]: every all-gather segment rank r receives; the optimizer needs them all.
  std::vector<std::vector<Dependency>> gathered(n);
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    Bytes bytes = 0;
    for (std::size_t i : buckets[k]) bytes += model.tensors[i].bytes;
    const std::size_t ready_layer = layer_of[buckets[k].back()];
    const auto segs = ring_segments(bytes, n, o.max_segment_bytes, element);
    const std::size_t per_shard = segs.size() / n;
    const std::string label = "bucket" + std::to_string(k);
    // sent[r][j - shard * per_shard]: rank r's send of segment j of its shard in
    // the previous round; its right neighbour works on the same shard now.
    std::vector<std::vector<OpIndex>> sent(n, std::vector<OpIndex>(per_shard, 0));
    std::vector<std::vector<OpIndex>> now = sent;
    std::vector<Dependency> after(1);
    const std::uint32_t rounds = 2 * (n - 1);
    for (std::uint32_t round = 0; round < rounds; ++round) {
      for (std::uint32_t r = 0; r < n; ++r) {
        const std::uint32_t shard = (r + n - round % n) % n;
        const std::uint32_t left = (r + n - 1) % n;
        for (std::size_t j = shard * per_shard; j < (shard + 1) * per_shard; ++j) {
          if (segs[j] == 0) continue;
          const std::size_t slot = j - shard * per_shard;
          after[0] = round == 0 ? local(bwd[r][ready_layer]) : received(sent[left][slot]);
          now[r][slot] = b.send(right[r],
                                [&] {
                                  return "r" + std::to_string(r) + ".b" + std::to_string(k) + ".k" + std::to_string(round) + ".s" +
                                         std::to_string(j);
                                },
                                segs[j], label, after);
          if (round + 1 >= n && o.optimizer > 0) gathered[(r + 1) % n].push_back(received(now[r][slot]));
        }
      }
      std::swap(sent, now);
    }
  }

  if (o.optimizer > 0) {
    for (std::uint32_t r = 0; r < n; ++r) {
      std::vector<Dependency> after = std::move(gathered[r]);
      after.push_back(local(bwd[r].front()));  // the last backward op
      b.compute(r, [&] { return "r" + std::to_string(r) + ".opt"; }, o.optimizer, after);
    }
  }
  if (!graph) p.index();
  return p;
}

}  // namespace synth
}  // namespace tw

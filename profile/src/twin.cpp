// The DDP twin of a built ring all-reduce profile (twin.hpp).
#include "tensorwire/profile/twin.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace tw {
namespace {

constexpr double kRingShare = 0.8;  // of the profile's bytes on the ring flows
constexpr Bytes kMinPiece = 256 * kKiB;  // the twin's tensors: finer than any bucket size tried
constexpr std::size_t kMaxPieces = 1024;  // the fusion hint simulates the twin some 30 times
constexpr std::size_t kMaxBuckets = 256;  // DDP makes a few to some dozens

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? T{} : v[v.size() / 2];
}

std::optional<DdpTwin> none(std::string& why, std::string reason) {
  why = std::move(reason);
  return std::nullopt;
}

struct RankKind {
  Bytes bytes = 0;  // sent on the ring flow
  double place = 0;  // the mean place of its messages on the flow from the forward op, 0 to 1
};

struct RankBuckets {
  std::map<Bytes, RankKind> kinds;  // by segment size: the kind's largest message size
  Nanos forward = 0;  // the rank's largest compute op
};

}  // namespace

std::optional<DdpTwin> ddp_twin(const Profile& p, std::string& why) {
  const std::size_t n = p.ranks.size();
  if (n < 2) return none(why, "a ring needs at least 2 ranks");
  for (const Rank& r : p.ranks) {
    if (r.role != Role::worker) return none(why, "rank " + std::to_string(r.id) + " is a server, not a ring all-reduce");
  }
  std::vector<Bytes> flow_bytes(p.flows.size(), 0);
  Bytes total = 0;
  for (const Op& op : p.ops) {
    if (op.type == OpType::send) flow_bytes[op.flow] += op.bytes, total += op.bytes;
  }
  constexpr FlowIndex kNone = std::numeric_limits<FlowIndex>::max();
  std::vector<FlowIndex> ring_flow(n, kNone);
  for (FlowIndex f = 0; f < p.flows.size(); ++f) {
    FlowIndex& best = ring_flow[p.flows[f].src];
    if (flow_bytes[f] > 0 && (best == kNone || flow_bytes[f] > flow_bytes[best])) best = f;
  }
  DdpTwin t;
  Bytes ring_bytes = 0;
  std::vector<bool> seen(n, false);
  RankId at = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (ring_flow[at] == kNone) return none(why, "rank " + std::to_string(at) + " sends nothing");
    if (seen[at]) break;
    seen[at] = true;
    t.ring.push_back(at);
    t.ring_flows.push_back(ring_flow[at]);
    ring_bytes += flow_bytes[ring_flow[at]];
    at = p.flows[ring_flow[at]].dst;
  }
  if (t.ring.size() != n || at != 0) return none(why, "the ranks' busiest flows do not form one ring through all of them");
  if (static_cast<double>(ring_bytes) < kRingShare * static_cast<double>(total)) {
    return none(why, "the ring's flows carry less than 80% of the bytes");
  }

  // Each rank's buckets. Gloo cuts a bucket into equal segments, so the ring
  // flow's message sizes tell its buckets apart. Sizes carrying under 2% of the
  // flow's bytes are notifications; a size with under a quarter of the messages
  // of the next larger size is that bucket's short last segment. The buckets are
  // in the order of their messages' mean place on the flow, counted from the
  // rank's largest compute op (its forward pass) round the iteration: a bucket's
  // messages overlap the next one's backward, and a rank's iteration can be cut
  // anywhere in its communication.
  std::vector<RankBuckets> ranks(n);
  Bytes largest_message = 0;
  for (RankId r = 0; r < n; ++r) {
    RankBuckets& rb = ranks[r];
    OpIndex forward = 0;
    Nanos longest = -1;
    for (OpIndex o = 0; o < p.ops.size(); ++o) {
      if (p.ops[o].type == OpType::compute && p.ops[o].rank == r && p.ops[o].duration > longest) longest = p.ops[o].duration, forward = o;
    }
    if (longest <= 0) return none(why, "rank " + std::to_string(r) + " has no compute before its all-reduce");
    rb.forward = longest;
    std::size_t messages = 0, before_forward = 0;
    for (OpIndex o = 0; o < p.ops.size(); ++o) {
      if (p.ops[o].type == OpType::send && p.ops[o].flow == ring_flow[r]) ++messages, before_forward += o < forward ? 1 : 0;
    }
    struct Size {
      std::size_t place = 0, count = 0;  // place: the sum of its messages' places
      Bytes bytes = 0, key = 0;
    };
    std::map<Bytes, Size> sizes;
    std::size_t at = 0;
    for (const Op& op : p.ops) {
      if (op.type != OpType::send || op.flow != ring_flow[r]) continue;
      largest_message = std::max(largest_message, op.bytes);
      Size& z = sizes[op.bytes];
      ++z.count, z.place += (at++ + messages - before_forward) % messages, z.bytes += op.bytes;
    }
    std::vector<Size> kinds;  // from the largest size down
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
      const Size& z = it->second;
      if (static_cast<double>(z.bytes) < 0.02 * static_cast<double>(flow_bytes[ring_flow[r]])) continue;
      if (!kinds.empty() && z.count * 4 < kinds.back().count) {
        kinds.back().bytes += z.bytes, kinds.back().count += z.count, kinds.back().place += z.place;
      } else {
        kinds.push_back(z);
        kinds.back().key = it->first;
      }
    }
    if (kinds.empty()) return none(why, "rank " + std::to_string(r) + " sends nothing but notifications on its ring flow");
    for (const Size& z : kinds) {
      rb.kinds[z.key] = {z.bytes, static_cast<double>(z.place) / static_cast<double>(z.count) / static_cast<double>(messages)};
    }
  }
  // Ranks agree on the buckets by their segment size (every rank cuts a bucket
  // alike), not by their order: a size most ranks see is a bucket, placed at the
  // median of its places, its bytes the median of theirs.
  std::map<Bytes, std::vector<const RankKind*>> by_key;
  for (const RankBuckets& rb : ranks) {
    for (const auto& [key, kind] : rb.kinds) by_key[key].push_back(&kind);
  }
  struct Bucket {
    Bytes sent = 0;
    double place = 0;
  };
  std::vector<Bucket> found;
  for (const auto& [key, seen] : by_key) {
    if (seen.size() * 2 <= n) continue;
    std::vector<Bytes> sent;
    std::vector<double> place;
    for (const RankKind* k : seen) sent.push_back(k->bytes), place.push_back(k->place);
    found.push_back({median(sent), median(place)});
  }
  if (found.empty()) return none(why, "the ranks' ring flows do not agree on their segment sizes");
  if (found.size() > kMaxBuckets) return none(why, "more than " + std::to_string(kMaxBuckets) + " message sizes on the ring flows");
  std::sort(found.begin(), found.end(), [](const Bucket& a, const Bucket& b) { return a.place < b.place; });
  const double ring_factor = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
  for (const Bucket& b : found) {
    // Whole float32 elements.
    t.buckets.push_back(std::max<Bytes>(4, static_cast<Bytes>(static_cast<double>(b.sent) / ring_factor) / 4 * 4));
  }
  const std::size_t count = t.buckets.size();
  for (Bytes b : t.buckets) t.gradient_bytes += b;

  // Compute: the backward at twice the forward (the usual cost of a backward
  // pass), both spread over the gradients by bytes. The first guess of the
  // forward is a third of the ranks' median largest compute op; the fusion hint
  // fits it (set_forward).
  std::vector<Nanos> forward;
  for (const RankBuckets& rb : ranks) forward.push_back(rb.forward);
  const Nanos first_guess = median(forward) / 3;

  // Tensors in registration order (the reverse of ready order), in pieces.
  const Bytes piece = std::max<Bytes>(kMinPiece, (t.gradient_bytes / kMaxPieces + 3) / 4 * 4);
  Model& m = t.model;
  m.name = "twin of " + (p.metadata.model.empty() ? std::string("the captured job") : p.metadata.model);
  m.dtype = "float32";
  for (std::size_t k = 0; k < count; ++k) {
    for (Bytes off = 0, j = 0; off < t.buckets[k]; off += piece, ++j) {
      ModelTensor x;
      x.bytes = std::min(piece, t.buckets[k] - off);
      x.elements = x.bytes / 4;
      x.dtype = m.dtype;
      x.name = "bucket" + std::to_string(k) + ".piece" + std::to_string(j) + ".grad";
      m.tensors.push_back(std::move(x));
    }
  }
  std::reverse(m.tensors.begin(), m.tensors.end());
  set_forward(t, first_guess);

  SynthOptions& o = t.options;
  o.pattern = Pattern::ring_allreduce;
  o.ranks = static_cast<std::uint32_t>(n);
  o.iterations = 4;
  o.first_bucket_bytes = t.buckets[0];
  o.bucket_bytes = 25 * kMiB;  // DDP's default, when every gradient is in the first bucket
  if (count > 1) o.bucket_bytes = *std::max_element(t.buckets.begin() + 1, t.buckets.end());
  o.max_segment_bytes = std::max<Bytes>(1 * kMiB, largest_message);
  return t;
}

void set_forward(DdpTwin& t, Nanos fwd) {
  t.fwd = std::max<Nanos>(0, fwd);
  t.bwd = 2 * t.fwd;
  t.model.fwd = t.fwd, t.model.bwd = t.bwd;
  const auto by_bytes = [&](Nanos total, const ModelTensor& x) {
    return std::max<Nanos>(1, static_cast<Nanos>(static_cast<double>(total) * static_cast<double>(x.bytes) /
                                                 static_cast<double>(t.gradient_bytes)));
  };
  for (ModelTensor& x : t.model.tensors) x.fwd = by_bytes(t.fwd, x), x.bwd = by_bytes(t.bwd, x);
}

}  // namespace tw

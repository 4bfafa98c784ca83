// The DDP twin of a built ring all-reduce profile (twin.hpp).
#include "tensorwire/profile/twin.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace tw {
namespace {

constexpr double kBucketStart = 0.05;  // share of a rank's compute that starts a bucket
constexpr double kRingShare = 0.8;  // of the profile's bytes on the ring flows
constexpr Bytes kMinPiece = 256 * kKiB;  // the twin's tensors: finer than any bucket size tried
constexpr std::size_t kMaxPieces = 2048;

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? T{} : v[v.size() / 2];
}

std::optional<DdpTwin> none(std::string& why, std::string reason) {
  why = std::move(reason);
  return std::nullopt;
}

struct RankBuckets {
  std::vector<Bytes> sent;  // on the ring flow, per bucket
  std::vector<Nanos> compute;  // the compute op that started it
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
    ring_bytes += flow_bytes[ring_flow[at]];
    at = p.flows[ring_flow[at]].dst;
  }
  if (t.ring.size() != n || at != 0) return none(why, "the ranks' busiest flows do not form one ring through all of them");
  if (static_cast<double>(ring_bytes) < kRingShare * static_cast<double>(total)) {
    return none(why, "the ring's flows carry less than 80% of the bytes");
  }

  // Each rank's buckets. Gloo cuts a bucket into equal segments, so the ring
  // flow's message sizes tell its buckets apart, in the order of their messages'
  // mean place on the flow (a bucket's messages overlap the next bucket's
  // backward, so the compute ops alone do not tell; and the last bucket's
  // all-gather can end after the cut of the iteration, at its start).
  // Sizes carrying under 2% of the flow's bytes are notifications; a size with
  // under a quarter of the messages of the next larger size is that bucket's
  // short last segment. A bucket's backward is the largest compute op of its
  // rank between the first message of the bucket before and its own first
  // message (the ops of a built profile are in the order of their median start;
  // the many short waits of the job's communication thread are not it); the
  // first bucket's holds the forward pass too. Buckets of one size (DDP's 25 MiB
  // ones) are told apart by the compute ops that began them: each compute op of
  // at least 5% of the rank's compute begins a bucket, and the ones beyond the
  // sizes split the size with the most bytes.
  std::vector<RankBuckets> ranks(n);
  std::vector<Nanos> rank_compute(n, 0);
  for (const Op& op : p.ops) {
    if (op.type == OpType::compute) rank_compute[op.rank] += op.duration;
  }
  Bytes largest_message = 0;
  for (RankId r = 0; r < n; ++r) {
    RankBuckets& rb = ranks[r];
    const Nanos threshold = std::max<Nanos>(1, static_cast<Nanos>(kBucketStart * static_cast<double>(rank_compute[r])));
    struct Size {
      std::size_t at = 0, count = 0;  // at: the sum of its messages' places on the flow
      Bytes bytes = 0;
      OpIndex first = 0;  // its first message after the forward op (0: none yet)
    };
    // The rank's largest compute op holds its forward pass: a bucket's first
    // message is its first after that (the last bucket's all-gather can end
    // after the cut of the iteration, before it).
    OpIndex forward = 0;
    Nanos longest = -1;
    for (OpIndex o = 0; o < p.ops.size(); ++o) {
      if (p.ops[o].type == OpType::compute && p.ops[o].rank == r && p.ops[o].duration > longest) longest = p.ops[o].duration, forward = o;
    }
    if (longest <= 0) return none(why, "rank " + std::to_string(r) + " has no compute before its all-reduce");
    std::map<Bytes, Size> sizes;
    std::size_t index = 0, large = 0;
    for (OpIndex o = 0; o < p.ops.size(); ++o) {
      const Op& op = p.ops[o];
      if (op.type == OpType::compute && op.rank == r) {
        if (op.duration >= threshold) ++large;
      } else if (op.type == OpType::send && op.flow == ring_flow[r]) {
        largest_message = std::max(largest_message, op.bytes);
        Size& z = sizes[op.bytes];
        if (o > forward && (z.first <= forward || o < z.first)) z.first = o;
        ++z.count, z.at += index, z.bytes += op.bytes;
        ++index;
      }
    }
    // From the largest size down: a size with under a quarter of the messages
    // of the next larger one kept is that bucket's short last segment.
    std::vector<Size> kinds;
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
      const Size& z = it->second;
      if (static_cast<double>(z.bytes) < 0.02 * static_cast<double>(flow_bytes[ring_flow[r]])) continue;
      if (!kinds.empty() && z.count * 4 < kinds.back().count) {
        Size& k = kinds.back();
        k.bytes += z.bytes, k.count += z.count, k.at += z.at, k.first = std::min(k.first, z.first);
      } else {
        kinds.push_back(z);
      }
    }
    std::sort(kinds.begin(), kinds.end(), [](const Size& a, const Size& b) {
      return static_cast<double>(a.at) / static_cast<double>(a.count) < static_cast<double>(b.at) / static_cast<double>(b.count);
    });
    if (kinds.empty()) return none(why, "rank " + std::to_string(r) + " sends nothing but notifications on its ring flow");
    const std::size_t extra = large > kinds.size() ? large - kinds.size() : 0;
    const auto biggest = static_cast<std::size_t>(
        std::max_element(kinds.begin(), kinds.end(), [](const Size& a, const Size& b) { return a.bytes < b.bytes; }) - kinds.begin());
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      Nanos backward = longest;
      if (k > 0) {
        backward = 0;
        for (OpIndex o = kinds[k - 1].first; o < kinds[k].first; ++o) {
          if (p.ops[o].type == OpType::compute && p.ops[o].rank == r) backward = std::max(backward, p.ops[o].duration);
        }
      }
      const std::size_t parts = k == biggest ? extra + 1 : 1;
      for (std::size_t j = 0; j < parts; ++j) {
        rb.sent.push_back(kinds[k].bytes / parts);
        rb.compute.push_back(backward / static_cast<Nanos>(parts));
      }
    }
  }
  // The bucket count most ranks see; each bucket the median of those ranks.
  std::map<std::size_t, std::size_t> votes;
  for (const RankBuckets& rb : ranks) ++votes[rb.sent.size()];
  const std::size_t count =
      std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  const double ring_factor = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
  std::vector<Nanos> compute(count, 0);
  for (std::size_t k = 0; k < count; ++k) {
    std::vector<Bytes> b;
    std::vector<Nanos> c;
    for (const RankBuckets& rb : ranks) {
      if (rb.sent.size() == count) b.push_back(rb.sent[k]), c.push_back(rb.compute[k]);
    }
    // Whole float32 elements.
    t.buckets.push_back(std::max<Bytes>(4, static_cast<Bytes>(static_cast<double>(median(b)) / ring_factor) / 4 * 4));
    compute[k] = median(c);
  }
  for (Bytes b : t.buckets) t.gradient_bytes += b;

  // The first bucket's compute holds the forward pass and the backward of its
  // own layers: those at the later buckets' backward time per byte (at most
  // half of it), or DDP's usual two thirds when there is no later bucket.
  Nanos later = 0;
  Bytes later_bytes = 0;
  for (std::size_t k = 1; k < count; ++k) later += compute[k], later_bytes += t.buckets[k];
  Nanos bwd0 = count > 1 && later_bytes > 0
                   ? std::min(compute[0] / 2, static_cast<Nanos>(static_cast<double>(later) / static_cast<double>(later_bytes) *
                                                                 static_cast<double>(t.buckets[0])))
                   : compute[0] * 2 / 3;
  t.fwd = compute[0] - bwd0;
  t.bwd = bwd0 + later;

  // Tensors in registration order (the reverse of ready order), in pieces.
  const Bytes piece = std::max<Bytes>(kMinPiece, (t.gradient_bytes / kMaxPieces + 3) / 4 * 4);
  Model& m = t.model;
  m.name = "twin of " + (p.metadata.model.empty() ? std::string("the captured job") : p.metadata.model);
  m.dtype = "float32";
  m.fwd = t.fwd, m.bwd = t.bwd;
  for (std::size_t k = 0; k < count; ++k) {
    const Nanos bucket_bwd = k == 0 ? bwd0 : compute[k];
    for (Bytes off = 0, j = 0; off < t.buckets[k]; off += piece, ++j) {
      ModelTensor x;
      x.bytes = std::min(piece, t.buckets[k] - off);
      x.elements = x.bytes / 4;
      x.dtype = m.dtype;
      x.name = "bucket" + std::to_string(k) + ".piece" + std::to_string(j) + ".grad";
      const double share = static_cast<double>(x.bytes);
      x.bwd = std::max<Nanos>(1, static_cast<Nanos>(static_cast<double>(bucket_bwd) * share / static_cast<double>(t.buckets[k])));
      m.tensors.push_back(std::move(x));
    }
  }
  std::reverse(m.tensors.begin(), m.tensors.end());
  set_forward(t, t.fwd);

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
  t.model.fwd = t.fwd;
  for (ModelTensor& x : t.model.tensors) {
    x.fwd = std::max<Nanos>(1, static_cast<Nanos>(static_cast<double>(t.fwd) * static_cast<double>(x.bytes) /
                                                  static_cast<double>(t.gradient_bytes)));
  }
}

}  // namespace tw

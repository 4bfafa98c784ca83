#include <gtest/gtest.h>

#include <map>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"
#include "tensorwire/profile/synth.hpp"
#include "tensorwire/profile/twin.hpp"
#include "inline_profile.hpp"
#include "../support/page_faults.hpp"

namespace tw {
namespace {

TEST(Models, BundledTensorListsMatchTheRealModels) {
  struct Expect {
    const char* name;
    std::size_t tensors;
    std::uint64_t parameters;
  };
  for (const Expect& e : {Expect{"resnet50", 161, 25'557'032}, Expect{"vgg16", 32, 138'357'544},
                          Expect{"bert-large", 391, 335'141'888}, Expect{"mlp", 6, 5'824'522}}) {
    SCOPED_TRACE(e.name);
    const Model m = load_model(e.name);
    EXPECT_EQ(m.tensors.size(), e.tensors);
    EXPECT_EQ(m.total_elements(), e.parameters);
    EXPECT_EQ(m.total_bytes(), 4 * e.parameters);
    EXPECT_GT(m.fwd, 0);
    EXPECT_GT(m.bwd, 0);
  }
  EXPECT_EQ(load_model("resnet50").tensors.front().name, "conv1.weight");
  EXPECT_THROW(load_model("resnet51"), std::invalid_argument);
}

TEST(Models, RejectsMalformedTensorLists) {
  try {
    load_model_text("model: m\nparameters: 7\ntensors:\n  - {name: a, shape: [2, 3]}\n  - {name: b}\n", "m.yaml");
    FAIL();
  } catch (const InputError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1U);
    EXPECT_EQ(e.diagnostics()[0].str(), "m.yaml:5:5: tensor 'b' needs exactly one of 'shape' and 'elements'");
  }
  try {
    load_model_text("model: m\nparameters: 7\ntensors:\n  - {name: a, shape: [2, 3]}\n", "m.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.diagnostics()[0].str(), "m.yaml:2:13: the model: 'parameters' is 7 but the tensors hold 6");
  }
}

// Found by a probe of damaged inputs: a shape of [2^32, 2^32] wrapped to 0
// elements and wrote `bytes: 0`, and a tensor larger than a profile's may be or
// two of one name made a profile that `profile validate` refused.
TEST(Models, RejectsTensorsNoProfileCanHold) {
  const auto problems = [](const std::string& tensors) -> std::string {
    try {
      load_model_text("model: m\ntensors:\n" + tensors, "m.yaml");
    } catch (const InputError& e) {
      std::string out;
      for (const auto& d : e.diagnostics()) out += d.str() + "\n";
      return out;
    }
    return "read";
  };
  EXPECT_EQ(problems("  - {name: a, shape: [4294967296, 4294967296]}\n"), "m.yaml:3:35: tensor 'a' has more than 2^40 elements\n");
  EXPECT_EQ(problems("  - {name: a, shape: [65536, 65536, 65536, 65536, 65536]}\n"),
            "m.yaml:3:37: tensor 'a' has more than 2^40 elements\n");
  EXPECT_EQ(problems("  - {name: a, elements: 17179869184}\n  - {name: b, shape: [4294967296, 4]}\n"), "read") << "64 GiB each";
  EXPECT_EQ(problems("  - {name: a, elements: 17179869185}\n"),
            "m.yaml:3:25: tensor 'a' holds 17179869185 elements of float32, more than the limit of 64.00 GiB a tensor may hold\n");
  EXPECT_EQ(problems("  - {name: a, shape: [1099511627776], dtype: float64}\n"),
            "m.yaml:3:22: tensor 'a' holds 1099511627776 elements of float64, more than the limit of 64.00 GiB a tensor may hold\n");
  EXPECT_EQ(problems("  - {name: a, shape: [2, 3]}\n  - {name: b, elements: 4}\n  - {name: a, elements: 4}\n"),
            "m.yaml:5:12: tensor name 'a' is used twice (first at line 3)\n");
}

TEST(DdpBuckets, FillInReverseOrderAndCloseAtTheLimit) {
  const Model m = load_model("resnet50");
  const auto buckets = ddp_buckets(m, kMiB, 25 * kMiB);
  // Every tensor once, in gradient-ready (reverse registration) order.
  std::vector<std::size_t> order;
  for (const auto& b : buckets) order.insert(order.end(), b.begin(), b.end());
  ASSERT_EQ(order.size(), m.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], m.tensors.size() - 1 - i);
  // Each bucket but the last closed on the tensor that took it to its limit.
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const Bytes limit = k == 0 ? kMiB : 25 * kMiB;
    Bytes size = 0;
    for (std::size_t i : buckets[k]) size += m.tensors[i].bytes;
    const Bytes without_last = size - m.tensors[buckets[k].back()].bytes;
    if (k + 1 < buckets.size()) {
      EXPECT_GE(size, limit) << k;
    }
    EXPECT_LT(without_last, limit) << k;
  }
  // ResNet-50: fc.weight alone (8 MB) passes the 1 MiB first limit.
  EXPECT_EQ(buckets[0].size(), 2U);
  EXPECT_EQ(m.tensors[buckets[0][1]].name, "fc.weight");
  EXPECT_EQ(buckets.size(), 5U);
}

TEST(RingSegments, CoverTheBucketInRankMultiples) {
  for (std::uint32_t n : {2U, 3U, 4U, 7U, 16U}) {
    for (Bytes bytes : {Bytes{4}, Bytes{1000}, kMiB, 25 * kMiB + 12, 100 * kMiB}) {
      const auto segs = ring_segments(bytes, n, kMiB, 4);
      EXPECT_EQ(segs.size() % n, 0U);
      EXPECT_GE(segs.size(), 2U * n);
      Bytes sum = 0;
      for (Bytes s : segs) {
        EXPECT_LE(s, kMiB);
        sum += s;
      }
      EXPECT_EQ(sum, bytes);
    }
  }
}

SynthOptions ring(std::uint32_t n) {
  SynthOptions o;
  o.pattern = Pattern::ring_allreduce;
  o.ranks = n;
  o.iterations = 3;
  return o;
}

// Synthesised profiles must be valid profiles: write them and read them back.
Profile roundtrip(const Profile& p) {
  ProfileLoad l = load_profile_text(write_profile_yaml(p), "synth.yaml");
  EXPECT_TRUE(l.ok()) << (l.diagnostics.empty() ? "" : l.diagnostics[0].str());
  return l.ok() ? std::move(*l.profile) : Profile{};
}

TEST(SynthRing, EachRankSendsTwoNMinusOneOverNOfTheGradients) {
  const Model m = load_model("resnet50");
  const Bytes grad = m.total_bytes();
  for (std::uint32_t n : {2U, 3U, 4U, 8U}) {
    SCOPED_TRACE(n);
    const Profile p = roundtrip(synthesize(m, ring(n)));
    const ProfileStats s = compute_stats(p);
    ASSERT_EQ(s.ranks.size(), n);
    EXPECT_EQ(s.bytes_per_iteration, 2 * (n - 1) * grad);  // exactly, over all ranks
    // Per rank, shards differ only by the rounding of segments to whole elements.
    const double share = 2.0 * (n - 1) / n * static_cast<double>(grad);
    for (std::uint32_t r = 0; r < n; ++r) {
      EXPECT_NEAR(static_cast<double>(s.ranks[r].sent), share, 2.0 * (n - 1) * 5 * 4 * 64);
      EXPECT_EQ(s.ranks[(r + 1) % n].received, s.ranks[r].sent) << "each rank receives what its left neighbour sends";
    }
    EXPECT_EQ(p.flows.size(), n);
  }
}

TEST(SynthRing, FollowsDdpBucketsAndRingDependencies) {
  const Model m = load_model("resnet50");
  const Profile p = roundtrip(synthesize(m, ring(4)));
  const auto buckets = ddp_buckets(m, kMiB, 25 * kMiB);
  // One bucket label per DDP bucket, and its tensors as DDP would group them.
  std::map<std::string, Bytes> bucket_bytes;
  for (const auto& t : p.tensors) bucket_bytes[t.bucket] += t.bytes;
  ASSERT_EQ(bucket_bytes.size(), buckets.size());
  // Round 0 of a bucket waits for that rank's backward op; later rounds for the
  // receipt of the same segment from the left neighbour in the round before.
  std::size_t checked = 0;
  for (const Op& op : p.ops) {
    if (op.type != OpType::send) continue;
    ASSERT_EQ(op.after.size(), 1U) << op.id;
    const Op& dep = p.ops[op.after[0].op];
    if (op.id.find(".k0.") != std::string::npos) {
      EXPECT_EQ(dep.type, OpType::compute);
      EXPECT_EQ(dep.rank, op.rank);
      EXPECT_NE(dep.id.find(".bwd."), std::string::npos);
    } else {
      EXPECT_TRUE(op.after[0].recv);
      EXPECT_EQ(p.flows[dep.flow].dst, op.rank);
      EXPECT_EQ(dep.bytes, op.bytes);
      EXPECT_EQ(dep.tensor, op.tensor);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0U);
  // The first bucket is ready after the last layer's backward (fc), the first to run.
  const Op& first = p.ops[p.op_by_id.at("r0.b0.k0.s0")];
  EXPECT_EQ(p.ops[first.after[0].op].id, "r0.bwd.fc");
}

TEST(SynthRing, SplitsComputeAcrossLayersByDefault) {
  const Model m = load_model("resnet50");
  SynthOptions o = ring(2);
  o.fwd = 30 * kMilli;
  o.bwd = 60 * kMilli;
  o.optimizer = 2 * kMilli;
  const Profile p = roundtrip(synthesize(m, o));
  Nanos fwd = 0, bwd = 0, opt = 0;
  for (const Op& op : p.ops) {
    if (op.type != OpType::compute || op.rank != 0) continue;
    if (op.id.starts_with("r0.fwd.")) fwd += op.duration;
    else if (op.id.starts_with("r0.bwd.")) bwd += op.duration;
    else opt += op.duration;
  }
  const auto layers = static_cast<Nanos>(m.layers().size());
  EXPECT_NEAR(static_cast<double>(fwd), 30e6, static_cast<double>(layers));
  EXPECT_NEAR(static_cast<double>(bwd), 60e6, static_cast<double>(layers));
  EXPECT_EQ(opt, 2 * kMilli);
  // The biggest layer (fc, 8 MB of 102 MB) gets its share of the time.
  const Op& fc = p.ops[p.op_by_id.at("r0.fwd.fc")];
  EXPECT_NEAR(static_cast<double>(fc.duration), 30e6 * (2048.0 * 1000 + 1000) * 4 / static_cast<double>(m.total_bytes()), 2);
}

TEST(SynthRing, RejectsImpossibleOptions) {
  const Model m = load_model("mlp");
  EXPECT_THROW(synthesize(m, ring(1)), std::invalid_argument);
  SynthOptions o = ring(2);
  o.iterations = 0;
  EXPECT_THROW(synthesize(m, o), std::invalid_argument);
}

// A pattern past the op cap is refused before its profile is made: counted
// first, it touches a few MB. Built until the cap (ten million ops of a few
// hundred bytes each), it had taken 4 GB when it was refused.
TEST(SynthRing, APatternPastTheCapIsRefusedBeforeItIsMade) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator and shadow memory fault pages of their own";
#else
  const Model m = load_model("resnet50");
  const long before = test::minor_faults();
  try {
    synthesize(m, ring(4096));
    FAIL() << "a ring of 4096 ranks of ResNet-50 makes more ops than a profile may hold";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("more than 10000000 ops (the most a profile may hold) at 4096 ranks"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(test::minor_faults() - before, 65536) << "pages touched (4 KiB each)";
#endif
}

TEST(SynthPs, EveryPushedByteIsPulledBack) {
  const Model m = load_model("resnet50");
  SynthOptions o;
  o.pattern = Pattern::parameter_server;
  o.ranks = 4;
  o.servers = 2;
  o.iterations = 2;
  const Profile p = roundtrip(synthesize(m, o));
  ASSERT_EQ(p.ranks.size(), 6U);
  EXPECT_EQ(p.ranks[4].role, Role::server);
  // Per tensor: bytes pushed by each worker equal bytes pulled by each worker.
  std::map<std::pair<std::string, RankId>, Bytes> pushed, pulled;
  for (const Op& op : p.ops) {
    if (op.type != OpType::send) continue;
    const Flow& f = p.flows[op.flow];
    if (p.ranks[f.src].role == Role::worker) pushed[{op.tensor, f.src}] += op.bytes;
    else pulled[{op.tensor, f.dst}] += op.bytes;
  }
  EXPECT_EQ(pushed, pulled);
  const ProfileStats s = compute_stats(p);
  for (RankId w = 0; w < 4; ++w) {
    EXPECT_EQ(s.ranks[w].sent, m.total_bytes());
    EXPECT_EQ(s.ranks[w].received, m.total_bytes());
  }
  EXPECT_EQ(s.ranks[4].received + s.ranks[5].received, 4 * m.total_bytes());
  // Servers aggregate a key once all workers' pushes of it arrived.
  for (const Op& op : p.ops) {
    if (op.type == OpType::compute && p.ranks[op.rank].role == Role::server) {
      ASSERT_EQ(op.after.size(), 4U) << op.id;
      for (const auto& d : op.after) EXPECT_TRUE(d.recv);
    }
  }
  // Partitions: no message above 4 MiB; fc.weight (8 MB) is split in two.
  EXPECT_LE(s.largest_message, 4 * kMiB);
  EXPECT_TRUE(p.op_by_id.count("r0.push.fc.weight.p1"));
}


// A built profile of a 3-rank DDP ring as `profile build` writes it (ops in the
// order of their median start): per rank the forward, the first bucket's segments
// on the ring flow, a second bucket begun by its backward compute, notifications
// the other way round and the short waits between them; the second bucket's
// all-gather ends after the cut, so one of its segments comes first. The twin
// finds both buckets' gradients (the ring sends 2(n-1)/n of them) and their order.
std::string ddp_ring_text() {
  std::string t = "version: 1\niterations: 4\nranks: [{id: 0}, {id: 1}, {id: 2}]\nflows:\n";
  for (int r = 0; r < 3; ++r) {
    t += "  - {id: d" + std::to_string(r) + ", src: " + std::to_string(r) + ", dst: " + std::to_string((r + 1) % 3) + "}\n";
    t += "  - {id: n" + std::to_string(r) + ", src: " + std::to_string(r) + ", dst: " + std::to_string((r + 2) % 3) + "}\n";
  }
  t += "ops:\n";
  for (int r = 0; r < 3; ++r) {
    const std::string R = std::to_string(r);
    const auto send = [&](const std::string& id, const std::string& flow, int bytes) {
      t += "  - {id: " + id + ", type: send, flow: " + flow + R + ", bytes: " + std::to_string(bytes) + "}\n";
    };
    const auto compute = [&](const std::string& id, const std::string& d) {
      t += "  - {id: " + id + ", type: compute, rank: " + R + ", duration: " + d + "}\n";
    };
    send("r" + R + ".tail", "d", 150000);  // the second bucket's last segment, of the iteration before
    compute("r" + R + ".fwd", "12ms");
    for (int j = 0; j < 4; ++j) {
      send("r" + R + ".b0." + std::to_string(j), "d", 300000);
      send("r" + R + ".n0." + std::to_string(j), "n", 48);
      compute("r" + R + ".w0." + std::to_string(j), "200us");
    }
    compute("r" + R + ".bwd1", "3ms");
    for (int j = 0; j < 3; ++j) {
      send("r" + R + ".b1." + std::to_string(j), "d", 150000);
      send("r" + R + ".n1." + std::to_string(j), "n", 48);
      compute("r" + R + ".w1." + std::to_string(j), "200us");
    }
  }
  return t;
}

TEST(DdpTwin, FindsTheBucketsOfABuiltRingProfile) {
  const Profile p = test::inline_profile(ddp_ring_text());
  std::string why;
  auto t = ddp_twin(p, why);
  ASSERT_TRUE(t) << why;
  ASSERT_EQ(t->buckets.size(), 2u);
  EXPECT_EQ(t->buckets[0], 900000u);  // 4 x 300000 sent, x 3/4
  EXPECT_EQ(t->buckets[1], 450000u);
  EXPECT_EQ(t->gradient_bytes, 1350000u);
  EXPECT_EQ(t->options.ranks, 3u);
  EXPECT_EQ(t->options.first_bucket_bytes, 900000u);
  EXPECT_EQ(t->options.bucket_bytes, 450000u);
  // The first guess of the compute: a third of the largest compute op forward,
  // twice that backward, spread by bytes.
  EXPECT_EQ(t->fwd, 4 * kMilli);
  EXPECT_EQ(t->bwd, 8 * kMilli);
  set_forward(*t, 9 * kMilli);
  Nanos fwd = 0, bwd = 0;
  for (const ModelTensor& x : t->model.tensors) fwd += *x.fwd, bwd += *x.bwd;
  EXPECT_NEAR(static_cast<double>(fwd), 9e6, 1e3);
  EXPECT_NEAR(static_cast<double>(bwd), 18e6, 1e3);
  Bytes total = 0;
  for (const ModelTensor& x : t->model.tensors) total += x.bytes;
  EXPECT_EQ(total, t->gradient_bytes);
  // Made again at its own buckets, the twin's ring sends what the profile's does.
  const auto buckets = ddp_buckets(t->model, t->options.first_bucket_bytes, t->options.bucket_bytes);
  ASSERT_EQ(buckets.size(), 2u);
  Bytes first = 0;
  for (std::size_t i : buckets[0]) first += t->model.tensors[i].bytes;
  EXPECT_EQ(first, 900000u);
}

TEST(DdpTwin, OnlyARingAllReduceHasOne) {
  std::string why;
  const Profile ps = synthesize(load_model("mlp"), [] {
    SynthOptions o;
    o.pattern = Pattern::parameter_server;
    o.ranks = 2;
    o.iterations = 2;
    return o;
  }());
  EXPECT_FALSE(ddp_twin(ps, why));
  EXPECT_NE(why.find("server"), std::string::npos) << why;
  // Three ranks whose busiest flows make a 2-cycle and leave one rank out.
  const Profile pair = test::inline_profile(R"(
version: 1
iterations: 2
ranks: [{id: 0}, {id: 1}, {id: 2}]
flows: [{id: a, src: 0, dst: 1}, {id: b, src: 1, dst: 0}, {id: c, src: 2, dst: 0}]
ops:
  - {id: w, type: compute, rank: 0, duration: 1ms}
  - {id: x, type: send, flow: a, bytes: 1MB}
  - {id: y, type: send, flow: b, bytes: 1MB}
  - {id: z, type: send, flow: c, bytes: 1MB}
)");
  EXPECT_FALSE(ddp_twin(pair, why));
  EXPECT_NE(why.find("one ring"), std::string::npos) << why;
}

}  // namespace
}  // namespace tw

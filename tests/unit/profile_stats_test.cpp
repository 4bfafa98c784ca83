#include "tensorwire/core/profile_stats.hpp"

#include <gtest/gtest.h>

#include "inline_profile.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

using test::inline_profile;

// Rank 0 computes 4 ms then sends 10 MB (8 ms at 10 Gb/s) to rank 1, which then
// computes 1 ms and sends 1 MB back (0.8 ms).
const char* const kChain =
    "version: 1\niterations: 3\nranks: [{id: 0}, {id: 1}]\n"
    "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 1, dst: 0}]\n"
    "ops:\n"
    "  - {id: c0, type: compute, rank: 0, duration: 4ms}\n"
    "  - {id: s0, type: send, flow: a, bytes: 10MB, tensor: t0, after: [c0]}\n"
    "  - {id: c1, type: compute, rank: 1, duration: 1ms, gap: 100us, after: [recv:s0]}\n"
    "  - {id: s1, type: send, flow: b, bytes: 1MB, tensor: t1, after: [c1]}\n";

TEST(ProfileStats, CountsBytesComputeAndTensors) {
  const Profile p = inline_profile(kChain);
  const ProfileStats s = compute_stats(p);
  EXPECT_EQ(s.compute_ops, 2U);
  EXPECT_EQ(s.send_ops, 2U);
  EXPECT_EQ(s.tensors, 2U);
  EXPECT_EQ(s.bytes_per_iteration, 11'000'000U);
  EXPECT_EQ(s.ranks[0].sent, 10'000'000U);
  EXPECT_EQ(s.ranks[0].received, 1'000'000U);
  EXPECT_EQ(s.ranks[1].compute, 1'000'000);
  EXPECT_EQ(s.flows[1].messages, 1U);
  EXPECT_EQ(s.smallest_message, 1'000'000U);
  EXPECT_EQ(s.largest_message, 10'000'000U);
}

TEST(ProfileStats, LowerBoundFollowsTheCriticalPath) {
  const Profile p = inline_profile(kChain);
  const LowerBound b = lower_bound(p, compute_stats(p), 10e9);
  EXPECT_EQ(b.critical_path, 4'000'000 + 8'000'000 + 100'000 + 1'000'000 + 800'000);
  EXPECT_EQ(b.iteration, b.critical_path);
  EXPECT_EQ(b.limited_by, "critical path");
  EXPECT_EQ(b.run, 3 * b.iteration);
  ASSERT_EQ(b.critical_ops.size(), 4U);
  EXPECT_EQ(p.ops[b.critical_ops.front()].id, "c0");
  EXPECT_EQ(p.ops[b.critical_ops.back()].id, "s1");
}

TEST(ProfileStats, LowerBoundSeesTheBusiestLink) {
  // Two independent 5 MB sends from rank 0: no path is long, but its link is busy.
  const Profile p = inline_profile(
      "version: 1\niterations: 1\nranks: [{id: 0}, {id: 1}, {id: 2}]\n"
      "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 0, dst: 2}]\n"
      "ops:\n  - {id: x, type: send, flow: a, bytes: 5MB}\n  - {id: y, type: send, flow: b, bytes: 5MB}\n");
  const LowerBound b = lower_bound(p, compute_stats(p), 1e9);
  EXPECT_EQ(b.critical_path, 40'000'000);
  EXPECT_EQ(b.iteration, 80'000'000);
  EXPECT_EQ(b.limited_by, "egress of rank 0");
}

TEST(ProfileStats, WithoutBarrierIterationsMayOverlap) {
  std::string text = kChain;
  text.replace(text.find("iterations: 3"), 13, "iterations: 3\niteration_barrier: false");
  const Profile p = inline_profile(text);
  const LowerBound b = lower_bound(p, compute_stats(p), 10e9);
  // Rank 0's link carries 8 ms per iteration; the chain is 13.9 ms once.
  EXPECT_EQ(b.run, std::max<Nanos>(3 * 8'000'000, b.critical_path));
}

TEST(ProfileStats, LowerBoundWithALinkPerRank) {
  // Rank 0 feeds ranks 1 and 2 side by side (5 MB each): its 2 Gb/s egress is the
  // limit of the pair, each message the slower of rank 0's egress and its receiver's ingress.
  const Profile p = inline_profile(
      "version: 1\niterations: 1\nranks: [{id: 0}, {id: 1}, {id: 2}]\n"
      "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 0, dst: 2}]\n"
      "ops:\n  - {id: x, type: send, flow: a, bytes: 5MB}\n  - {id: y, type: send, flow: b, bytes: 5MB, after: [x]}\n");
  const RankLinks links = {{2e9, 9e9}, {9e9, 1e9}, {9e9, 4e9}};
  const LowerBound b = lower_bound(p, compute_stats(p), links);
  EXPECT_EQ(b.critical_path, 40'000'000 + 20'000'000) << "x at rank 1's 1 Gb/s in, y at rank 0's 2 Gb/s out";
  EXPECT_EQ(b.max_egress, 40'000'000);
  EXPECT_EQ(b.max_ingress, 40'000'000);
  EXPECT_EQ(b.iteration, 60'000'000);
  EXPECT_EQ(b.link_bps, 0) << "the links differ";
  EXPECT_EQ(lower_bound(p, compute_stats(p), uniform_links(3, 1e9)).link_bps, 1e9);
  EXPECT_THROW(lower_bound(p, compute_stats(p), RankLinks(2, {1e9, 1e9})), std::invalid_argument);
  EXPECT_THROW(lower_bound(p, compute_stats(p), RankLinks{{0, 1e9}, {1e9, 1e9}, {1e9, 1e9}}), std::invalid_argument)
      << "rank 0 sends, so it needs an egress rate";
  EXPECT_NO_THROW(lower_bound(p, compute_stats(p), RankLinks{{1e9, 0}, {0, 1e9}, {0, 1e9}})) << "rates nobody uses may be 0";
}

TEST(ProfileStats, LowerBoundTakesBytesAndMessagesAtTheirOwnRates) {
  // Rank 0's two 5 MB messages each went at 1 Gb/s, side by side: its link moved
  // 2 Gb/s. Its bytes take 40 ms at 2 Gb/s; each message 40 ms at 1 Gb/s.
  const Profile p = inline_profile(
      "version: 1\niterations: 1\nranks: [{id: 0}, {id: 1}, {id: 2}]\n"
      "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 0, dst: 2}]\n"
      "ops:\n  - {id: x, type: send, flow: a, bytes: 5MB}\n  - {id: y, type: send, flow: b, bytes: 5MB}\n");
  const LowerBound b = lower_bound(p, compute_stats(p), uniform_links(3, 2e9), uniform_links(3, 1e9));
  EXPECT_EQ(b.max_egress, 40'000'000);
  EXPECT_EQ(b.critical_path, 40'000'000);
  EXPECT_EQ(b.iteration, 40'000'000);
  // One rate for both would be 80 ms (at 1 Gb/s: more than the 40 ms it took) or 20 ms.
  EXPECT_EQ(lower_bound(p, compute_stats(p), uniform_links(3, 1e9)).iteration, 80'000'000);
}

}  // namespace
}  // namespace tw

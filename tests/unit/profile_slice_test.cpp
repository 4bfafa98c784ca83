// A rank's slice of a profile: loads on its own, keeps what the rank needs, and
// drives the rank's executor exactly as the whole profile does.
#include "tensorwire/core/profile_slice.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <tuple>

#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/frame.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

Profile bundled(const char* name) {
  ProfileLoad l = load_profile_file(std::string(TW_SOURCE_DIR) + "/traffic_profiles/" + name);
  EXPECT_TRUE(l.ok()) << name;
  return l.ok() ? std::move(*l.profile) : Profile{};
}

// The actions rank `r`'s executor hands out, as (whole profile's op, iteration,
// planned start): each action completes 1 us after it was handed out, and when
// none is outstanding the earliest message not yet delivered arrives, or the
// clock moves to the next wake.
std::vector<std::tuple<OpIndex, std::uint32_t, Nanos>> drive(const Profile& p, const IndexMap& map, RankId r) {
  ExecutorOptions o;
  o.iterations = 2;
  Executor ex(p, r, o);
  std::vector<std::pair<OpIndex, std::uint32_t>> incoming;
  for (std::uint32_t it = 0; it < 2; ++it) {
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      if (p.ops[i].type == OpType::send && p.flows[p.ops[i].flow].dst == r) incoming.emplace_back(static_cast<OpIndex>(i), it);
    }
  }
  std::vector<std::tuple<OpIndex, std::uint32_t, Nanos>> out;
  std::deque<Action> pending;
  std::size_t delivered = 0;
  Nanos now = 0;
  ex.start(now);
  for (int step = 0; step < 1'000'000 && !ex.finished(); ++step) {
    Action a;
    while (ex.next_action(a)) {
      out.emplace_back(map.to_global(a.op), a.iteration, a.at);
      pending.push_back(a);
    }
    now += kMicro;
    if (!pending.empty()) {
      const Action done = pending.front();
      pending.pop_front();
      if (done.kind == Action::Kind::compute) {
        ex.compute_done(done.op, done.iteration, now);
      } else {
        ex.send_done(done.op, done.iteration, now);
      }
    } else if (delivered < incoming.size()) {
      ex.received(incoming[delivered].first, incoming[delivered].second, now);
      ++delivered;
    } else if (const auto w = ex.next_wake()) {
      now = std::max(now, *w);
      ex.tick(now);
    }
  }
  EXPECT_TRUE(ex.finished());
  EXPECT_FALSE(out.empty());
  return out;
}

TEST(ProfileSlice, ARanksSliceLoadsAloneAndRunsAsTheWhole) {
  for (const char* name : {"mlp-ring-2.yaml", "resnet50-ring-4.yaml", "resnet50-ps-4w2s.yaml"}) {
    SCOPED_TRACE(name);
    const Profile whole = bundled(name);
    std::size_t sliced_ops = 0;
    for (RankId r = 0; r < whole.ranks.size(); ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const ProfileSlice s = slice_profile(whole, r);
      ASSERT_EQ(s.global.size(), s.profile.ops.size());
      sliced_ops += s.global.size();
      // Exactly the rank's own ops and the messages to it, in the whole's order.
      std::size_t expected = 0;
      for (const Op& op : whole.ops) expected += op.rank == r || (op.type == OpType::send && whole.flows[op.flow].dst == r) ? 1 : 0;
      EXPECT_EQ(s.global.size(), expected);
      for (std::size_t i = 0; i < s.global.size(); ++i) {
        const Op& a = s.profile.ops[i];
        const Op& b = whole.ops[s.global[i]];
        ASSERT_EQ(a.id, b.id);
        EXPECT_EQ(a.type, b.type);
        EXPECT_EQ(a.rank, b.rank);
        EXPECT_EQ(a.bytes, b.bytes);
        if (a.type == OpType::send) {
          ASSERT_LT(a.flow, s.flows.size());
          EXPECT_EQ(s.flows[a.flow], b.flow);
        }
        if (i > 0) {
          EXPECT_LT(s.global[i - 1], s.global[i]);
        }
        if (a.rank == r) {
          ASSERT_EQ(a.after.size(), b.after.size());
          for (std::size_t k = 0; k < a.after.size(); ++k) EXPECT_EQ(s.global[a.after[k].op], b.after[k].op);
        } else {
          EXPECT_TRUE(a.after.empty());
        }
      }
      // What the controller sends loads back as the same slice.
      ProfileLoad back = load_profile_text(write_profile_yaml(s.profile), "slice.yaml");
      ASSERT_TRUE(back.ok()) << (back.diagnostics.empty() ? "" : back.diagnostics.front().str());
      EXPECT_EQ(frame::profile_digest(*back.profile), frame::profile_digest(s.profile));
      // Its op indices travel as runs and come back.
      std::string why;
      const auto again = indices_from_runs(index_runs(s.global), s.global.size(), whole.ops.size(), why);
      ASSERT_TRUE(again) << why;
      EXPECT_EQ(*again, s.global);
      // The rank's executor does the same with either.
      const IndexMap map(s.global);
      EXPECT_EQ(drive(*back.profile, map, r), drive(whole, IndexMap(), r));
      for (std::size_t i = 0; i < s.global.size(); ++i) {
        const std::optional<OpIndex> local = map.to_local(s.global[i]);
        EXPECT_EQ(local, std::optional<OpIndex>(static_cast<OpIndex>(i)));
      }
    }
    // Each op is in its rank's slice, and a message in its receiver's too.
    std::size_t messages = 0;
    for (const Op& op : whole.ops) messages += op.type == OpType::send ? 1 : 0;
    EXPECT_EQ(sliced_ops, whole.ops.size() + messages);
  }
}

// A slice holds the flows its rank sends or receives on, no other, in the whole's
// order: what an agent is sent does not grow with ranks it never talks to.
TEST(ProfileSlice, ASliceHoldsOnlyItsRanksFlows) {
  for (const char* name : {"resnet50-ring-4.yaml", "resnet50-ps-4w2s.yaml"}) {
    SCOPED_TRACE(name);
    const Profile whole = bundled(name);
    for (RankId r = 0; r < whole.ranks.size(); ++r) {
      const ProfileSlice s = slice_profile(whole, r);
      std::vector<FlowIndex> expected;
      for (FlowIndex f = 0; f < whole.flows.size(); ++f) {
        if (whole.flows[f].src == r || whole.flows[f].dst == r) expected.push_back(f);
      }
      EXPECT_EQ(s.flows, expected) << "rank " << r;
      ASSERT_EQ(s.profile.flows.size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(s.profile.flows[i].id, whole.flows[expected[i]].id);
      EXPECT_EQ(s.profile.ranks.size(), whole.ranks.size());
    }
  }
}

// A rank of a pipeline (a send to the next stage, one back) gets a slice of the
// same size whatever the number of stages, but for the ranks' ids.
TEST(ProfileSlice, APipelineStagesSliceDoesNotGrowWithTheStages) {
  const auto pipeline = [](std::size_t n) {
    std::string y = "version: 1\niterations: 1\nranks:\n";
    for (std::size_t i = 0; i < n; ++i) y += "  - {id: " + std::to_string(i) + "}\n";
    y += "flows:\n";
    for (std::size_t i = 0; i + 1 < n; ++i) {
      y += "  - {id: f" + std::to_string(i) + ", src: " + std::to_string(i) + ", dst: " + std::to_string(i + 1) + "}\n";
    }
    y += "ops:\n";
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const std::string after = i == 0 ? "" : ", after: [recv:s" + std::to_string(i - 1) + "]";
      y += "  - {id: s" + std::to_string(i) + ", type: send, flow: f" + std::to_string(i) + ", bytes: 1MiB" + after + "}\n";
    }
    ProfileLoad l = load_profile_text(y, "pipeline.yaml");
    EXPECT_TRUE(l.ok()) << (l.diagnostics.empty() ? "" : l.diagnostics.front().str());
    return std::move(*l.profile);
  };
  std::vector<std::size_t> sizes;
  for (const std::size_t n : {8, 64, 512}) {
    const Profile whole = pipeline(n);
    const ProfileSlice s = slice_profile(whole, 5);
    EXPECT_EQ(s.profile.flows.size(), 2u) << n;
    EXPECT_EQ(s.profile.ops.size(), 2u) << n;
    Profile without_ranks = s.profile;
    without_ranks.ranks.resize(6);
    sizes.push_back(write_profile_yaml(without_ranks).size());
  }
  EXPECT_EQ(sizes[0], sizes[1]);
  EXPECT_EQ(sizes[1], sizes[2]);
}

// The controller slices every rank from one pass over the profile: each rank
// gets its own ops and the messages to it, and the flows it sends or receives
// on, in the profile's order; the slice made from them is the one made alone.
// The simulator's slices leave the ranks out.
TEST(ProfileSlice, OnePassGivesEveryRanksParts) {
  const Profile whole = bundled("resnet50-ps-4w2s.yaml");
  const auto parts = slice_parts(whole);
  ASSERT_EQ(parts.size(), whole.ranks.size());
  for (RankId r = 0; r < whole.ranks.size(); ++r) {
    std::vector<OpIndex> expected;
    for (OpIndex g = 0; g < whole.ops.size(); ++g) {
      const Op& op = whole.ops[g];
      if (op.rank == r || (op.type == OpType::send && whole.flows[op.flow].dst == r)) expected.push_back(g);
    }
    EXPECT_EQ(parts[r].members, expected) << "rank " << r;
    std::vector<FlowIndex> flows;
    for (FlowIndex f = 0; f < whole.flows.size(); ++f) {
      if (whole.flows[f].src == r || whole.flows[f].dst == r) flows.push_back(f);
    }
    EXPECT_EQ(parts[r].flows, flows) << "rank " << r;
    const ProfileSlice alone = slice_profile(whole, r);
    const ProfileSlice from_parts = slice_profile(whole, r, parts[r]);
    EXPECT_EQ(write_profile_yaml(from_parts.profile), write_profile_yaml(alone.profile)) << "rank " << r;
    EXPECT_EQ(from_parts.global, alone.global);
    EXPECT_EQ(from_parts.flows, alone.flows);
    const ProfileSlice bare = slice_profile(whole, r, parts[r], SliceRanks::none);
    EXPECT_TRUE(bare.profile.ranks.empty());
    EXPECT_EQ(bare.profile.ops.size(), alone.profile.ops.size());
  }
}

TEST(ProfileSlice, OpsOutsideTheSliceAreNotInIt) {
  const Profile whole = bundled("resnet50-ring-4.yaml");
  const ProfileSlice s = slice_profile(whole, 0);
  const IndexMap map(s.global);
  for (OpIndex g = 0; g < whole.ops.size(); ++g) {
    const Op& op = whole.ops[g];
    const bool in = op.rank == 0 || (op.type == OpType::send && whole.flows[op.flow].dst == 0);
    EXPECT_EQ(map.to_local(g).has_value(), in) << op.id;
  }
  EXPECT_FALSE(map.to_local(static_cast<OpIndex>(whole.ops.size())));
  EXPECT_THROW(slice_profile(whole, 4), std::out_of_range);
}

TEST(ProfileSlice, IndexRunsAreCheckedBeforeUse) {
  EXPECT_EQ(index_runs({0, 1, 2, 5, 6, 9}), (IndexRuns{{0, 3}, {5, 2}, {9, 1}}));
  EXPECT_TRUE(index_runs({}).empty());
  std::string why;
  EXPECT_EQ(indices_from_runs({{0, 3}, {5, 2}}, 5, 10, why), (std::vector<OpIndex>{0, 1, 2, 5, 6}));
  for (const auto& [runs, expected, whole] : std::vector<std::tuple<IndexRuns, std::uint64_t, std::uint64_t>>{
           {{{5, 2}, {0, 3}}, 5, 10},                 // out of order
           {{{0, 3}, {2, 2}}, 5, 10},                 // overlapping
           {{{8, 3}}, 3, 10},                         // beyond the profile
           {{{0, 0}}, 0, 10},                         // an empty run
           {{{0, 3}}, 4, 10},                         // fewer than the slice's ops
           {{{0, ~0ULL}}, 5, 10},                     // a count that would wrap
           {{{0, 4'000'000'000ULL}}, 4'000'000'000ULL, 4'000'000'000ULL},  // beyond any profile: nothing allocated
       }) {
    why.clear();
    EXPECT_FALSE(indices_from_runs(runs, expected, whole, why));
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace tw

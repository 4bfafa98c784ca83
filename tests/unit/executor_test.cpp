#include "tensorwire/core/executor.hpp"

#include <gtest/gtest.h>

#include <map>

#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {
namespace {

Profile load(const std::string& text) {
  ProfileLoad l = load_profile_text(text, "t.yaml");
  EXPECT_TRUE(l.ok()) << (l.diagnostics.empty() ? "" : l.diagnostics[0].str());
  return l.ok() ? std::move(*l.profile) : Profile{};
}

const char* const kChain =
    "version: 1\niterations: 3\nranks: [{id: 0}, {id: 1}]\n"
    "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 1, dst: 0}]\n"
    "ops:\n"
    "  - {id: c0, type: compute, rank: 0, duration: 4ms}\n"
    "  - {id: s0, type: send, flow: a, bytes: 10MB, after: [c0]}\n"
    "  - {id: c1, type: compute, rank: 1, duration: 1ms, gap: 100us, after: [recv:s0]}\n"
    "  - {id: s1, type: send, flow: b, bytes: 1MB, after: [c1]}\n";

// Every op instance started no earlier than its dependencies completed plus its gap.
void expect_dependencies_honoured(const Profile& p, const SimResult& r) {
  std::map<std::pair<OpIndex, std::uint32_t>, const SimOpTiming*> at;
  for (const auto& t : r.ops) at[{t.op, t.iteration}] = &t;
  for (const auto& t : r.ops) {
    EXPECT_GE(t.start, t.planned);
    for (const Dependency& d : p.ops[t.op].after) {
      if (t.iteration < d.iterations_back) continue;
      const auto* dep = at.at({d.op, t.iteration - d.iterations_back});
      const Nanos done = d.recv ? dep->received + p.flows[p.ops[d.op].flow].read_lag : dep->end;
      EXPECT_GE(t.start, done + p.ops[t.op].gap) << p.ops[t.op].id << " before " << p.ops[d.op].id;
    }
  }
}

TEST(Executor, ChainRunsAtItsCriticalPathWithTheBarrier) {
  const Profile p = load(kChain);
  SimOptions o;
  o.link_bps = 10e9;
  const SimResult r = simulate(p, o);
  const Nanos iteration = 4'000'000 + 8'000'000 + 100'000 + 1'000'000 + 800'000;
  ASSERT_EQ(r.iteration_end.size(), 3U);
  EXPECT_EQ(r.iteration_end[0], iteration);
  EXPECT_EQ(r.iteration_end[2], 3 * iteration);
  EXPECT_EQ(r.iteration_times(), std::vector<Nanos>(3, iteration)) << "each from the end of the one before";
  EXPECT_EQ(r.makespan, lower_bound(p, compute_stats(p), 10e9).run);
  expect_dependencies_honoured(p, r);
  ASSERT_EQ(r.rank_iterations[1].size(), 3U);
  // Rank 1 enters iteration 1 when it has received s0 of iteration 0 and sent s1.
  EXPECT_EQ(r.rank_iterations[1][1].start, r.rank_iterations[1][0].end);
}

TEST(Executor, ComputeOpsShareTheirRankAndSendsTheirFlow) {
  const Profile p = load(
      "version: 1\niterations: 1\nranks: [{id: 0}, {id: 1}]\nflows: [{id: a, src: 0, dst: 1}]\n"
      "ops:\n"
      "  - {id: x, type: compute, rank: 0, duration: 2ms}\n"
      "  - {id: y, type: compute, rank: 0, duration: 3ms}\n"
      "  - {id: m, type: send, flow: a, bytes: 1MB}\n"
      "  - {id: n, type: send, flow: a, bytes: 1MB}\n");
  SimOptions o;
  o.link_bps = 8e9;  // 1 ms per MB
  const SimResult r = simulate(p, o);
  std::map<std::string, SimOpTiming> t;
  for (const auto& x : r.ops) t[p.ops[x.op].id] = x;
  EXPECT_EQ(t["x"].start, 0);  // file order breaks the tie
  EXPECT_EQ(t["y"].start, 2'000'000);
  EXPECT_EQ(t["m"].start, 0);  // sends do not wait for compute
  EXPECT_EQ(t["n"].start, 1'000'000);  // but for the previous message on the flow
  EXPECT_EQ(r.makespan, 5'000'000);
}

TEST(Executor, GapsDelayTheStartAndNeedAWake) {
  const Profile p = load(
      "version: 1\niterations: 1\nranks: [{id: 0}]\nflows: []\n"
      "ops:\n  - {id: x, type: compute, rank: 0, duration: 1ms, gap: 500us}\n");
  Executor ex(p, 0, {});
  ex.start(1000);
  Action a;
  EXPECT_FALSE(ex.next_action(a));  // not yet: it is planned 500 us later
  ASSERT_TRUE(ex.next_wake().has_value());
  EXPECT_EQ(*ex.next_wake(), 501'000);
  ex.tick(500'999);
  EXPECT_FALSE(ex.next_action(a));
  ex.tick(501'000);
  ASSERT_TRUE(ex.next_action(a));
  EXPECT_EQ(a.at, 501'000);
  EXPECT_EQ(a.duration, 1'000'000);
  ex.compute_done(a.op, a.iteration, 1'501'000);
  EXPECT_TRUE(ex.finished());
  Executor::IterationTimes it;
  ASSERT_TRUE(ex.pop_completed(it));
  EXPECT_EQ(it.start, 1000);
  EXPECT_EQ(it.end, 1'501'000);
}

TEST(Executor, AReceiptWaitsForItsFlowsReadLag) {
  std::string text = kChain;
  text.replace(text.find("{id: a, src: 0, dst: 1}"), 23, "{id: a, src: 0, dst: 1, read_lag: 300us}");
  text.replace(text.find("{id: b, src: 1, dst: 0}"), 23, "{id: b, src: 1, dst: 0, read_lag: 200us}");
  const Profile p = load(text);
  SimOptions o;
  o.link_bps = 10e9;
  const SimResult r = simulate(p, o);
  const Nanos iteration = 4'000'000 + 8'000'000 + 300'000 + 100'000 + 1'000'000 + 800'000 + 200'000;
  EXPECT_EQ(r.iteration_times(), std::vector<Nanos>(3, iteration)) << "each hop is read its lag after it arrived";
  expect_dependencies_honoured(p, r);
  for (const auto& t : r.ops) {
    if (p.ops[t.op].id == "s0") {
      EXPECT_EQ(t.received, t.end) << "'received' stays the arrival";
    }
  }
  EXPECT_LE(lower_bound(p, compute_stats(p), 10e9).run, r.makespan);
}

TEST(Executor, EachIterationTakesItsOwnDurationAndGap) {
  const Profile p = load(
      "version: 1\niterations: 4\nranks: [{id: 0}]\nflows: []\n"
      "ops:\n  - {id: x, type: compute, rank: 0, duration: 2ms, durations: [1ms, 3ms, 2ms], gap: 10us, gaps: [0, 20us]}\n");
  SimOptions o;
  const SimResult r = simulate(p, o);
  // Iteration i: gap gaps[i % 2], then durations[i % 3].
  EXPECT_EQ(r.iteration_times(), (std::vector<Nanos>{1'000'000, 3'020'000, 2'000'000, 1'020'000}));
}

TEST(Executor, SlowdownStretchesCompute) {
  const Profile p = load(kChain);
  SimOptions o;
  o.slowdown = {1.5, 1.0};
  const SimResult r = simulate(p, o);
  EXPECT_EQ(r.iteration_end[0], 6'000'000 + 8'000'000 + 100'000 + 1'000'000 + 800'000);
}

TEST(Executor, WithoutTheBarrierIterationsOverlap) {
  // Rank 0 streams 3 messages without waiting for anything; rank 1 computes on each.
  const Profile p = load(
      "version: 1\niterations: 3\niteration_barrier: false\nranks: [{id: 0}, {id: 1}]\n"
      "flows: [{id: a, src: 0, dst: 1}]\n"
      "ops:\n"
      "  - {id: s, type: send, flow: a, bytes: 1MB}\n"
      "  - {id: c, type: compute, rank: 1, duration: 5ms, after: [recv:s]}\n");
  SimOptions o;
  o.link_bps = 8e9;
  const SimResult r = simulate(p, o);
  std::vector<Nanos> sends;
  for (const auto& t : r.ops) {
    if (p.ops[t.op].id == "s") sends.push_back(t.start);
  }
  EXPECT_EQ(sends, (std::vector<Nanos>{0, 1'000'000, 2'000'000}));  // back to back, not per iteration
  EXPECT_EQ(r.makespan, 1'000'000 + 3 * 5'000'000);
  expect_dependencies_honoured(p, r);
}

TEST(Executor, PreviousIterationDependencies) {
  // Without the barrier, s of iteration i waits for the receipt of t of i-1.
  const Profile p = load(
      "version: 1\niterations: 3\niteration_barrier: false\nranks: [{id: 0}, {id: 1}]\n"
      "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 1, dst: 0}]\n"
      "ops:\n"
      "  - {id: s, type: send, flow: a, bytes: 1MB, after: [recv:t@-1]}\n"
      "  - {id: t, type: send, flow: b, bytes: 1MB, after: [recv:s]}\n");
  SimOptions o;
  o.link_bps = 8e9;
  o.latency = 100'000;
  const SimResult r = simulate(p, o);
  EXPECT_EQ(r.makespan, 3 * 2 * 1'100'000);
  expect_dependencies_honoured(p, r);
}

TEST(Executor, OpenLoopKeepsTheOriginalSpacing) {
  const Profile p = load(kChain);
  SimOptions o;
  o.executor.open_loop = true;
  o.executor.period = 20'000'000;
  o.executor.offsets = {0, 4'000'000, 0, 13'000'000};
  const SimResult r = simulate(p, o);
  for (const auto& t : r.ops) {
    EXPECT_EQ(p.ops[t.op].type, OpType::send);
    EXPECT_EQ(t.start, static_cast<Nanos>(t.iteration) * 20'000'000 + o.executor.offsets[t.op]);
  }
  EXPECT_EQ(r.ops.size(), 6U);
}

TEST(Executor, BundledProfilesRunToTheEndAboveTheirLowerBound) {
  for (const char* f : {"resnet50-ring-4.yaml", "resnet50-ps-4w2s.yaml", "mlp-ring-2.yaml"}) {
    SCOPED_TRACE(f);
    ProfileLoad l = load_profile_file(std::string(TW_SOURCE_DIR) + "/traffic_profiles/" + f);
    ASSERT_TRUE(l.ok());
    Profile& p = *l.profile;
    p.iterations = 2;
    for (double bps : {1e9, 100e9}) {
      SimOptions o;
      o.link_bps = bps;
      const SimResult r = simulate(p, o);
      const LowerBound b = lower_bound(p, compute_stats(p), bps);
      EXPECT_GE(r.makespan, b.run);
      EXPECT_LE(r.makespan, 3 * b.run);  // no pathological serialisation
      expect_dependencies_honoured(p, r);
    }
  }
}

// A flow is awaited while an op of the rank waits for its messages: the agent
// gathers the reads of a flow nobody waits for (--read-gap-us) and reads one
// that somebody does at once.
TEST(Executor, SaysWhileAnOpWaitsForAFlowsMessages) {
  // Without the barrier: c computes on each message of a; b's messages are waited for by nobody.
  const Profile p = load(
      "version: 1\niterations: 2\niteration_barrier: false\nranks: [{id: 0}, {id: 1}]\n"
      "flows: [{id: a, src: 0, dst: 1}, {id: b, src: 0, dst: 1}]\n"
      "ops:\n"
      "  - {id: s, type: send, flow: a, bytes: 1MB}\n"
      "  - {id: u, type: send, flow: b, bytes: 1MB}\n"
      "  - {id: c, type: compute, rank: 1, duration: 5ms, after: [recv:s]}\n");
  Executor ex(p, 1, {});
  ex.start(0);
  EXPECT_TRUE(ex.awaited(0));  // c of iteration 0 waits for s
  EXPECT_FALSE(ex.awaited(1));
  std::uint64_t version = ex.awaited_version();
  ex.received(0, 0, 10);
  EXPECT_FALSE(ex.awaited(0)) << "c runs; its next instance is not armed yet";
  EXPECT_NE(ex.awaited_version(), version);
  Action a;
  ASSERT_TRUE(ex.next_action(a));
  EXPECT_EQ(a.op, 2U);
  version = ex.awaited_version();
  ex.received(1, 0, 20);  // u: nobody waits, nothing changes
  EXPECT_EQ(ex.awaited_version(), version);
  ex.compute_done(2, 0, 5'000'010);
  EXPECT_TRUE(ex.awaited(0)) << "c of iteration 1 waits for s";
  ex.received(0, 1, 5'000'020);
  EXPECT_FALSE(ex.awaited(0));
  EXPECT_FALSE(ex.awaited(1));

  // With the barrier: rank 0 of the chain waits for nothing until its own ops
  // are done; then its iteration waits for s1 alone, and the next begins with it.
  const Profile chain = load(kChain);
  Executor ex0(chain, 0, {});
  ex0.start(0);
  EXPECT_FALSE(ex0.awaited(1));
  ASSERT_TRUE(ex0.next_action(a));
  ex0.compute_done(a.op, 0, 4'000'000);
  ASSERT_TRUE(ex0.next_action(a));
  EXPECT_FALSE(ex0.awaited(1)) << "s0 is not sent yet";
  ex0.send_done(a.op, 0, 5'000'000);
  EXPECT_TRUE(ex0.awaited(1)) << "iteration 0 waits for s1 alone";
  version = ex0.awaited_version();
  ex0.received(3, 0, 6'000'000);
  EXPECT_FALSE(ex0.awaited(1)) << "iteration 1 began";
  EXPECT_NE(ex0.awaited_version(), version);
}

TEST(Executor, ReportsWhatItWaitsFor) {
  const Profile p = load(kChain);
  Executor ex(p, 1, {});
  ex.start(0);
  EXPECT_EQ(ex.waiting_for(), "iteration 0: 2 own op(s) not done (c1, s1); 1 message(s) not received (s0 from rank 0)");
}

}  // namespace
}  // namespace tw

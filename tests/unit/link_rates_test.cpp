// The reference for a profile without observed timings: each rank's link rates
// measured from a replay, the timing model at those rates, and a lower bound that
// no iteration of the replay beats. Timelines are made by hand.
#include "tensorwire/analysis/link_rates.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/analysis/sources.hpp"
#include "inline_profile.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {
namespace {

constexpr Nanos kMs = 1'000'000;

using test::inline_profile;

// A parameter server (rank 0) and three workers: each worker pushes 10 MB, the
// server updates for 1 ms, then sends 10 MB of parameters to each worker.
const char* const kPs =
    "version: 1\niterations: 2\nranks: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]\n"
    "flows: [{id: g1, src: 1, dst: 0}, {id: g2, src: 2, dst: 0}, {id: g3, src: 3, dst: 0},\n"
    "        {id: p1, src: 0, dst: 1}, {id: p2, src: 0, dst: 2}, {id: p3, src: 0, dst: 3}]\n"
    "ops:\n"
    "  - {id: g1, type: send, flow: g1, bytes: 10MB}\n"
    "  - {id: g2, type: send, flow: g2, bytes: 10MB}\n"
    "  - {id: g3, type: send, flow: g3, bytes: 10MB}\n"
    "  - {id: u, type: compute, rank: 0, duration: 1ms, after: [recv:g1, recv:g2, recv:g3]}\n"
    "  - {id: p1, type: send, flow: p1, bytes: 10MB, after: [u]}\n"
    "  - {id: p2, type: send, flow: p2, bytes: 10MB, after: [u]}\n"
    "  - {id: p3, type: send, flow: p3, bytes: 10MB, after: [u]}\n";

// A ring of three: each rank sends 4 MB to the next, computes 1 ms on what it got
// from the one before, and sends another 4 MB.
const char* const kRing =
    "version: 1\niterations: 2\nranks: [{id: 0}, {id: 1}, {id: 2}]\n"
    "flows: [{id: f0, src: 0, dst: 1}, {id: f1, src: 1, dst: 2}, {id: f2, src: 2, dst: 0}]\n"
    "ops:\n"
    "  - {id: a0, type: send, flow: f0, bytes: 4MB}\n"
    "  - {id: a1, type: send, flow: f1, bytes: 4MB}\n"
    "  - {id: a2, type: send, flow: f2, bytes: 4MB}\n"
    "  - {id: c0, type: compute, rank: 0, duration: 1ms, after: [recv:a2]}\n"
    "  - {id: c1, type: compute, rank: 1, duration: 1ms, after: [recv:a0]}\n"
    "  - {id: c2, type: compute, rank: 2, duration: 1ms, after: [recv:a1]}\n"
    "  - {id: b0, type: send, flow: f0, bytes: 4MB, after: [c0]}\n"
    "  - {id: b1, type: send, flow: f1, bytes: 4MB, after: [c1]}\n"
    "  - {id: b2, type: send, flow: f2, bytes: 4MB, after: [c2]}\n";

// A replay's timeline from each op's (start, end) per iteration, by op id.
Timeline replay_timeline(const Profile& p, const std::vector<std::map<std::string, Instance>>& iterations) {
  Timeline t;
  t.source = "run by hand";
  t.iterations = iterations.size();
  t.ops.assign(p.ops.size(), std::vector<Instance>(iterations.size()));
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    Nanos end = 0;
    for (std::size_t op = 0; op < p.ops.size(); ++op) {
      t.ops[op][i] = iterations[i].at(p.ops[op].id);
      end = std::max(end, t.ops[op][i].end);
    }
    t.iteration.push_back(end);
  }
  t.planned.assign(p.ops.size() * iterations.size(), 0);
  return t;
}

// The PS replayed on loopback: the three pushes run side by side at 8 Gb/s each
// (the server takes in 24 Gb/s), and so do the three parameter sends.
Timeline ps_replay(const Profile& p) {
  std::map<std::string, Instance> it = {{"g1", {0, 10 * kMs}}, {"g2", {0, 10 * kMs}}, {"g3", {0, 10 * kMs}},
                                        {"u", {10 * kMs, 11 * kMs}},
                                        {"p1", {11 * kMs, 21 * kMs}}, {"p2", {11 * kMs, 21 * kMs}}, {"p3", {11 * kMs, 21 * kMs}}};
  return replay_timeline(p, {it, it});
}

// The ring replayed with jitter: the second iteration's sends are faster.
Timeline ring_replay(const Profile& p) {
  std::map<std::string, Instance> slow, fast;
  for (const char* r : {"0", "1", "2"}) {
    slow[std::string("a") + r] = {0, 5 * kMs};
    slow[std::string("c") + r] = {5 * kMs, 6 * kMs};
    slow[std::string("b") + r] = {6 * kMs, 11 * kMs};
    fast[std::string("a") + r] = {0, 4 * kMs};
    fast[std::string("c") + r] = {4 * kMs, 5 * kMs};
    fast[std::string("b") + r] = {5 * kMs, 10 * kMs};
  }
  return replay_timeline(p, {slow, fast});
}

TEST(LinkRates, ARankSideBySideFlowsAddUp) {
  const Profile p = inline_profile(kPs);
  const MeasuredLinks m = measure_links(p, ps_replay(p));
  ASSERT_TRUE(m.known);
  EXPECT_NEAR(m.busy[0].egress_bps, 24e9, 1e3) << "30 MB in 10 ms: the server's link, not one flow's 8 Gb/s";
  EXPECT_NEAR(m.busy[0].ingress_bps, 24e9, 1e3);
  EXPECT_NEAR(m.busy[1].egress_bps, 8e9, 1e3);
  EXPECT_NEAR(m.busy[2].ingress_bps, 8e9, 1e3);
  EXPECT_NEAR(m.peak[0].egress_bps, 24e9, 1e3);
  EXPECT_NEAR(m.message[0].egress_bps, 8e9, 1e3) << "each message alone went at 8 Gb/s";
}

TEST(LinkRates, PeakIsTheFastestIterationAndMessageTheFastestMessage) {
  const Profile p = inline_profile(kRing);
  const MeasuredLinks m = measure_links(p, ring_replay(p));
  // 16 MB over 10 + 9 ms busy; the faster iteration: 8 MB in 9 ms; the fastest
  // message: 4 MB in 4 ms.
  EXPECT_NEAR(m.busy[0].egress_bps, 16e6 * 8 / 19e-3, 1e3);
  EXPECT_NEAR(m.peak[0].egress_bps, 8e6 * 8 / 9e-3, 1e3);
  EXPECT_NEAR(m.message[0].egress_bps, 8e9, 1e3);
  EXPECT_NEAR(m.message[1].ingress_bps, 8e9, 1e3);
}

TEST(LinkRates, NoTimedMessageNoRate) {
  const Profile p = inline_profile(kRing);
  Timeline t = ring_replay(p);
  for (auto& op : t.ops) {
    for (Instance& x : op) x.end = -1;
  }
  EXPECT_FALSE(measure_links(p, t).known);
}

TEST(LinkRates, ARankWithoutTimedMessagesGetsTheFastestRate) {
  const Profile p = inline_profile(kPs);
  Timeline t = ps_replay(p);
  const OpIndex g3 = 2;
  ASSERT_EQ(p.ops[g3].id, "g3");
  for (Instance& x : t.ops[g3]) x = {};
  const MeasuredLinks m = measure_links(p, t);
  EXPECT_GT(m.busy[3].egress_bps, 0) << "the bound and the model divide by it";
  EXPECT_GE(m.peak[3].egress_bps, m.peak[0].egress_bps);
  EXPECT_GT(m.message[3].egress_bps, 0);
}

TEST(LinkRates, TheEmulatedDelayIsNotLinkTime) {
  const Profile p = inline_profile(kPs);
  Timeline t = ps_replay(p);
  for (auto& op : t.ops) {
    for (Instance& x : op) x.end += 5 * kMs;  // delivered 5 ms after the last byte
  }
  const MeasuredLinks m = measure_links(p, t, 5 * kMs);
  EXPECT_NEAR(m.busy[0].egress_bps, 24e9, 1e3);
  EXPECT_NEAR(m.message[1].egress_bps, 8e9, 1e3);
  EXPECT_LT(measure_links(p, t).busy[0].egress_bps, 20e9) << "counted as link time, the delay would slow the link";
}

TEST(Simulator, ALinkIsSharedByTheMessagesCrossingIt) {
  const Profile p = inline_profile(kPs);
  SimOptions o;
  o.links = {{24e9, 24e9}, {8e9, 8e9}, {8e9, 8e9}, {8e9, 8e9}};
  const SimResult r = simulate(p, o);
  // All three pushes at 8 Gb/s side by side, not one after another at the server.
  EXPECT_EQ(r.iteration_times(), (std::vector<Nanos>{21 * kMs, 21 * kMs}));
  o.links.assign(4, {8e9, 8e9});
  // A server link of 8 Gb/s: each phase's 30 MB takes 30 ms, the three sharing it.
  for (Nanos t : simulate(p, o).iteration_times()) EXPECT_NEAR(static_cast<double>(t), 61e6, 2);
  o.links.resize(3);
  EXPECT_THROW(simulate(p, o), std::invalid_argument);
}

TEST(Simulator, NeverBeatsTheLowerBoundAtTheSameRates) {
  // Links that differ from rank to rank and between egress and ingress.
  for (const char* f : {"resnet50-ring-4.yaml", "resnet50-ps-4w2s.yaml", "mlp-ring-2.yaml"}) {
    SCOPED_TRACE(f);
    Profile p = test::bundled_profile(f);
    ASSERT_FALSE(p.ranks.empty());
    p.iterations = 2;
    SimOptions o;
    for (std::size_t r = 0; r < p.ranks.size(); ++r) {
      o.links.push_back({(1.0 + static_cast<double>(r)) * 1e9, (3.0 + static_cast<double>(r % 2)) * 1e9});
    }
    const SimResult sim = simulate(p, o);
    const LowerBound b = lower_bound(p, compute_stats(p), o.links);
    EXPECT_GE(sim.makespan, b.run);
    for (Nanos t : sim.iteration_times()) EXPECT_GE(t, b.iteration);
  }
}

TEST(Simulator, TimelineMeasuresWhatAReplayTimelineDoes) {
  const Profile p = inline_profile(kPs);
  SimOptions o;
  o.links = {{24e9, 24e9}, {8e9, 8e9}, {8e9, 8e9}, {8e9, 8e9}};
  const Timeline t = timeline_from_simulation(p, simulate(p, o), "model");
  ASSERT_EQ(t.iterations, 2U);
  EXPECT_EQ(t.iteration, (std::vector<Nanos>{21 * kMs, 21 * kMs}));
  const Instance p1 = t.ops[4][1];
  EXPECT_EQ(p.ops[4].id, "p1");
  EXPECT_EQ(p1.start, 11 * kMs) << "relative to its iteration's start";
  EXPECT_EQ(p1.end, 21 * kMs);
  EXPECT_EQ(t.flow_bytes[3], 20'000'000U);
  EXPECT_EQ(t.flow_busy[3], 20 * kMs);
  ASSERT_EQ(t.rank_iteration.size(), 4U);
  EXPECT_EQ(t.rank_iteration[0][0], 21 * kMs);
}

// A run directory as compare reads it, of a replay of `p` with default settings.
LoadedRun run_by_hand(const Profile& p, Timeline replay) {
  LoadedRun run;
  run.dir = "runs/by-hand";
  run.profile = p;
  run.timeline = std::move(replay);
  return run;
}

// What compare does with a profile that has no observed timings.
CompareResult compare_by_hand(const Profile& p, Timeline replay) { return compare_with_profile(p, run_by_hand(p, std::move(replay))); }

void expect_bound_holds(const CompareResult& r) {
  const Comparison& c = r.comparison;
  ASSERT_GT(c.lower_bound_ns, 0);
  ASSERT_FALSE(c.replay_iteration.empty());
  for (Nanos t : c.replay_iteration) EXPECT_LE(c.lower_bound_ns, t) << c.lower_bound_basis;
  EXPECT_EQ(c.reference_source.rfind("the timing model at the replay's measured link rates", 0), 0U) << c.reference_source;
}

TEST(CompareWithPlan, ParameterServerBoundHoldsAndTheModelMatches) {
  const Profile p = inline_profile(kPs);
  const CompareResult r = compare_by_hand(p, ps_replay(p));
  expect_bound_holds(r);
  // The bound is the chain push, update, send: 10 + 1 + 10 ms.
  EXPECT_NEAR(static_cast<double>(r.comparison.lower_bound_ns), 21e6, 10);
  // At the rates measured, the model takes what the replay took.
  EXPECT_EQ(r.comparison.reference_iteration, (std::vector<Nanos>{21 * kMs, 21 * kMs}));
  EXPECT_NEAR(r.comparison.iteration_pct.p50, 0, 1e-6);
  const std::string text = comparison_text(r.profile, r.comparison);
  const auto headline = text.find("median iteration time: replay 21.0");
  const auto bound = text.find("\nlower bound: ");
  ASSERT_NE(headline, std::string::npos) << text;
  ASSERT_NE(bound, std::string::npos) << text;
  EXPECT_LT(headline, bound) << "the lower bound on its own line below the headline";
}

TEST(CompareWithPlan, RingBoundHoldsForItsFastestIteration) {
  const Profile p = inline_profile(kRing);
  const CompareResult r = compare_by_hand(p, ring_replay(p));
  expect_bound_holds(r);
  // 4 ms, 1 ms, 4 ms at the fastest message's 8 Gb/s: the fastest iteration took 10 ms.
  EXPECT_NEAR(static_cast<double>(r.comparison.lower_bound_ns), 9e6, 10);
  ASSERT_EQ(r.comparison.reference_iteration.size(), 2U);
  EXPECT_GT(r.comparison.reference_iteration[0], r.comparison.lower_bound_ns);
}

TEST(CompareWithPlan, OpenLoopIsBoundByTheBusiestLinkAndModelledOnItsPlan) {
  const Profile p = inline_profile(kPs);
  LoadedRun run = run_by_hand(p, ps_replay(p));
  // Open loop the sends ignore their dependencies: pushes at 0, parameters at 11 ms.
  run.settings.open_loop = true;
  run.timeline.planned.clear();  // no plan anywhere
  CompareResult r = compare_with_profile(p, run);
  EXPECT_NEAR(static_cast<double>(r.comparison.lower_bound_ns), 10e6, 10) << "30 MB over the server's 24 Gb/s, no chain";
  EXPECT_NE(r.note.find("model runs closed loop"), std::string::npos) << r.note;
  run.settings.open_loop_period = 21 * kMs;
  run.settings.open_loop_offsets = {0, 0, 0, 10 * kMs, 11 * kMs, 11 * kMs, 11 * kMs};
  r = compare_with_profile(p, run);
  EXPECT_EQ(r.comparison.reference_source.rfind("the open-loop timing model", 0), 0U) << r.comparison.reference_source;
  EXPECT_EQ(r.comparison.reference_iteration, (std::vector<Nanos>{21 * kMs, 21 * kMs}));
  // Without the offsets in run.json, the planned starts the agents recorded.
  run.settings.open_loop_offsets.clear();
  run.timeline = ps_replay(p);
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t op = 0; op < p.ops.size(); ++op) run.timeline.planned[op * 2 + i] = run.timeline.ops[op][i].start;
  }
  r = compare_with_profile(p, run);
  EXPECT_EQ(r.comparison.reference_source.rfind("the open-loop timing model", 0), 0U) << r.comparison.reference_source;
  EXPECT_EQ(r.comparison.reference_iteration, (std::vector<Nanos>{21 * kMs, 21 * kMs}));
}

TEST(CompareWithPlan, TheModelAsksWhatTheAgentsWereAsked) {
  const Profile p = inline_profile(kPs);
  LoadedRun run = run_by_hand(p, ps_replay(p));
  run.settings.slowdown = {3.0, 1.0, 1.0, 1.0};  // the server computes 3 ms, not 1
  run.settings.delay = 2 * kMs;
  for (auto& op : run.timeline.ops) {
    for (Instance& x : op) x.end += 2 * kMs;
  }
  const CompareResult r = compare_with_profile(p, run);
  // Pushes 10 ms + 2 ms delay, update 3 ms, parameters 10 + 2 ms. The server
  // enters iteration 1 when its sends are done, 2 ms before the workers have
  // them, and the job-wide iteration counts from the first rank in it.
  EXPECT_EQ(r.comparison.reference_iteration, (std::vector<Nanos>{27 * kMs, 29 * kMs}));
}

TEST(CompareWithPlan, WithoutTimedMessagesThereIsNoModel) {
  const Profile p = inline_profile(kRing);
  Timeline t = ring_replay(p);
  for (auto& op : t.ops) {
    for (Instance& x : op) x.end = -1;
  }
  const CompareResult r = compare_by_hand(p, t);
  EXPECT_EQ(r.comparison.lower_bound_ns, -1);
  EXPECT_NE(r.note.find("no link rate"), std::string::npos) << r.note;
}

}  // namespace
}  // namespace tw

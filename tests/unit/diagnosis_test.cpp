// The what-if simulator against the Executor-based one, and the diagnosis on
// hand-built DAGs and on simulated jobs with a known straggler or slow link.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "inline_profile.hpp"
#include "tensorwire/analysis/diagnosis.hpp"
#include "tensorwire/analysis/graph_sim.hpp"
#include "tensorwire/analysis/mitigation.hpp"
#include "tensorwire/analysis/priority.hpp"
#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/profile/model.hpp"
#include "tensorwire/profile/synth.hpp"

namespace tw {
namespace {

double mean_from(const std::vector<Nanos>& v, std::size_t from) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from), v.end(), 0.0) / static_cast<double>(v.size() - from);
}

// A job-wide timeline of `p` simulated by the Executor-based simulator, with
// iteration times as a run's records give them (each from the end of the one before).
Timeline simulated_timeline(const Profile& p, const SimOptions& o) {
  const SimResult r = simulate(p, o);
  Timeline t = timeline_from_simulation(p, r, "test");
  t.iteration = r.iteration_times();
  return t;
}

DiagnosisInput input_of(const Profile& p, const SimOptions& o) {
  DiagnosisInput in;
  in.profile = p;
  in.measured = simulated_timeline(p, o);
  in.source = "test";
  for (std::size_t r = 0; r < p.ranks.size(); ++r) in.hosts.push_back("h" + std::to_string(r));
  return in;
}

TEST(GraphSim, AgreesWithTheExecutorSimulatorOnRingAndParameterServer) {
  for (const char* name : {"resnet50-ring-4.yaml", "resnet50-ps-4w2s.yaml", "mlp-ring-2.yaml"}) {
    Profile p = test::bundled_profile(name);
    p.iterations = 3;
    SimOptions o;
    o.link_bps = 10e9;
    const SimResult old = simulate(p, o);
    FlowModel link;
    link.bps = 10e9;
    SimGraph g = sim_graph(p, link);
    g.rank_links = uniform_links(p.ranks.size(), 10e9);
    const GraphSimRun now = simulate_graph(g);
    ASSERT_EQ(old.iteration_end.size(), now.iteration_end.size()) << name;
    for (std::size_t i = 0; i < old.iteration_end.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(now.iteration_end[i]), static_cast<double>(old.iteration_end[i]),
                  1e-3 * static_cast<double>(old.iteration_end[i]))
          << name << " iteration " << i;
    }
  }
}

// m holds the flow while n and k become ready; k is the more urgent.
const char* const kPriorities =
    "version: 1\niterations: 1\nranks: [{id: 0}, {id: 1}]\nflows: [{id: a, src: 0, dst: 1}]\n"
    "ops:\n"
    "  - {id: m, type: send, flow: a, bytes: 1MB}\n"
    "  - {id: c, type: compute, rank: 0, duration: 100us}\n"
    "  - {id: n, type: send, flow: a, bytes: 1MB, priority: 5, after: [c]}\n"
    "  - {id: k, type: send, flow: a, bytes: 2MB, priority: PK, after: [c]}\n";

TEST(GraphSim, OfTheSendsWaitingOnAFlowTheMostUrgentGoesFirst) {
  for (const char* pk : {"1", "9"}) {
    std::string text = kPriorities;
    text.replace(text.find("PK"), 2, pk);
    const Profile p = test::inline_profile(text);
    SimOptions o;
    o.link_bps = 8e9;  // 1 ms per MB
    const SimResult old = simulate(p, o);
    std::map<std::string, Nanos> start;
    for (const auto& x : old.ops) start[p.ops[x.op].id] = x.start;
    const bool k_first = std::string(pk) == "1";
    EXPECT_EQ(start["m"], 0);
    EXPECT_EQ(start[k_first ? "k" : "n"], 1'000'000) << pk;
    EXPECT_EQ(start[k_first ? "n" : "k"], k_first ? 3'000'000 : 2'000'000) << pk;
    FlowModel link;
    link.bps = 8e9;
    GraphSimOptions so;
    so.record = true;
    const GraphSimRun now = simulate_graph(sim_graph(p, link), so);
    for (OpIndex op = 0; op < p.ops.size(); ++op) {
      if (p.ops[op].type == OpType::send) {
        EXPECT_EQ(now.instances[op].start, start[p.ops[op].id]) << p.ops[op].id << " " << pk;
      }
    }
  }
}

TEST(GraphSim, FlowModelTimesOneMessage) {
  const Profile p = test::one_message("1ms", "1MB");
  FlowModel link;
  link.bps = 8e9;  // 1 MB in 1 ms
  link.per_message = 10 * kMicro;
  link.latency = 50 * kMicro;
  GraphSimOptions so;
  so.record = true;
  const GraphSimRun r = simulate_graph(sim_graph(p, link), so);
  const SimInstance& s = r.at(p.op_by_id.at("s"), 0);
  EXPECT_EQ(s.start, kMilli);
  EXPECT_EQ(s.end, kMilli + 10 * kMicro + kMilli);
  EXPECT_EQ(s.received, s.end + 50 * kMicro);
  EXPECT_EQ(r.iteration_end[0], s.received + 2 * kMilli);
}

// What only some ops have (a measured lag, a message's measured hold and path,
// a compression's costs) lives beside the nodes: an op gets its own when set,
// a copy of the graph keeps its own, and a graph whose node names an extra it
// does not hold is refused rather than read out of bounds.
TEST(GraphSim, AnOpsExtraTimesAreItsOwnAndChecked) {
  const Profile p = test::one_message("1ms", "1MB");
  FlowModel link;
  link.bps = 8e9;  // 1 MB in 1 ms
  const SimGraph base = sim_graph(p, link);
  GraphSimOptions so;
  so.record = true;
  const OpIndex s = p.op_by_id.at("s");
  const GraphSimRun plain = simulate_graph(base, so);
  SimGraph g = base;
  g.set_lags(s, {100 * kMicro, 300 * kMicro});
  g.extra_for(s).prep = 20 * kMicro;
  g.extra_for(s).post = 5 * kMicro;
  g.iterations = 2;
  const GraphSimRun r = simulate_graph(g, so);
  for (std::uint32_t i = 0; i < 2; ++i) {
    const Nanos lag = i == 0 ? 100 * kMicro : 300 * kMicro;
    EXPECT_EQ(r.at(s, i).start - r.at(s, i).dispatched, lag) << i;
    EXPECT_EQ(r.at(s, i).end, r.at(s, i).start + 20 * kMicro + kMilli) << i;
    EXPECT_EQ(r.at(s, i).received, r.at(s, i).end + 5 * kMicro) << i;
  }
  EXPECT_EQ(simulate_graph(base, so).at(s, 0).end, plain.at(s, 0).end);  // the copy's, not the original's
  SimGraph h = g;  // a copy changed leaves the graph it came from as it was
  h.extra_for(s).prep = 0;
  h.set_lags(s, {0});
  EXPECT_EQ(g.extra(s).prep, 20 * kMicro);
  EXPECT_EQ(g.lag(s, 1), 300 * kMicro);
  EXPECT_EQ(h.lag(s, 1), 0);
  g.set_holds(s, {2 * kMilli, 2 * kMilli});  // the measured hold replaces the flow's model
  EXPECT_EQ(g.extra(s).hold_count, 1u);  // equal values: one entry
  EXPECT_EQ(simulate_graph(g, so).at(s, 1).end - simulate_graph(g, so).at(s, 1).start, 20 * kMicro + 2 * kMilli);
  g.set_holds(s, {0, 0});  // a measured hold of 0 is a hold, not the flow's model
  EXPECT_EQ(simulate_graph(g, so).at(s, 1).end - simulate_graph(g, so).at(s, 1).start, 20 * kMicro);
  g.set_gaps(s, {0, 0});  // no gap: no table
  EXPECT_EQ(g.ops[s].gap_count, 0u);
  g.drop_measured_messages();
  EXPECT_EQ(simulate_graph(g, so).at(s, 0).end, r.at(s, 0).end);
  g.ops[s].extra = 7;
  EXPECT_THROW(simulate_graph(g), std::invalid_argument);
}

TEST(GraphSim, SharedLinksLimitOnlyTheMessagesThatCrossThem) {
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 1
ranks: [{id: 0}, {id: 1}, {id: 2}]
flows: [{id: a, src: 0, dst: 2}, {id: b, src: 1, dst: 2}]
ops:
  - {id: x, type: send, flow: a, bytes: 1MB}
  - {id: y, type: send, flow: b, bytes: 1MB}
)");
  FlowModel link;
  link.bps = 100e9;
  SimGraph g = sim_graph(p, link);
  // Rank 0 sends at 10 Gb/s, rank 1 at 1 Gb/s, and rank 2's ingress has no limit
  // of its own: each message goes at its sender's rate.
  g.rank_links = {{10e9, 0}, {1e9, 0}, {0, 0}};
  GraphSimOptions so;
  so.record = true;
  const GraphSimRun r = simulate_graph(g, so);
  EXPECT_NEAR(static_cast<double>(r.at(p.op_by_id.at("x"), 0).end), 0.8e6, 1e3);
  EXPECT_NEAR(static_cast<double>(r.at(p.op_by_id.at("y"), 0).end), 8e6, 1e3);
  g.iterations = 0;
  EXPECT_THROW(simulate_graph(g), std::invalid_argument);
}

// Max-min sharing against the Executor-based simulator's, on random jobs: 3 to 6
// ranks, random flows between them (several may share a rank's egress or
// ingress), sends of random sizes after random earlier sends or computes, and
// every rank's egress and ingress at its own rate, some unlimited.
TEST(GraphSim, SharedLinksAgreeWithTheExecutorSimulatorOnRandomJobs) {
  std::mt19937 rng(20261206);
  for (int trial = 0; trial < 60; ++trial) {
    const int ranks = 3 + static_cast<int>(rng() % 4);
    std::string text = "version: 1\niterations: 2\nranks: [";
    for (int r = 0; r < ranks; ++r) text += (r ? ", {id: " : "{id: ") + std::to_string(r) + "}";
    text += "]\nflows:\n";
    const int flows = 2 + static_cast<int>(rng() % 8);
    std::vector<int> src(flows), dst(flows);
    for (int f = 0; f < flows; ++f) {
      src[f] = static_cast<int>(rng() % ranks);
      dst[f] = (src[f] + 1 + static_cast<int>(rng() % (ranks - 1))) % ranks;
      text += "  - {id: f" + std::to_string(f) + ", src: " + std::to_string(src[f]) + ", dst: " + std::to_string(dst[f]) + "}\n";
    }
    text += "ops:\n";
    const int ops = 4 + static_cast<int>(rng() % 20);
    std::vector<int> op_rank, op_to;  // op_to: a send's receiver, else -1
    for (int k = 0; k < ops; ++k) {
      const int f = static_cast<int>(rng() % flows);
      const bool compute = rng() % 4 == 0;
      // After an earlier op of its rank, or the receipt of an earlier message to it.
      std::string after;
      if (k > 0 && rng() % 2) {
        const int j = static_cast<int>(rng() % k);
        if (op_rank[j] == src[f]) after = ", after: [o" + std::to_string(j) + "]";
        if (op_to[j] == src[f]) after = ", after: [recv:o" + std::to_string(j) + "]";
      }
      op_rank.push_back(src[f]);
      op_to.push_back(compute ? -1 : dst[f]);
      if (compute) {
        text += "  - {id: o" + std::to_string(k) + ", type: compute, rank: " + std::to_string(src[f]) + ", duration: " +
                std::to_string(1 + rng() % 500) + "us" + after + "}\n";
      } else {
        text += "  - {id: o" + std::to_string(k) + ", type: send, flow: f" + std::to_string(f) + ", bytes: " +
                std::to_string(1 + rng() % 4000) + "KB" + after + "}\n";
      }
    }
    const Profile p = test::inline_profile(text);
    RankLinks links(static_cast<std::size_t>(ranks));
    const double rates[] = {0, 1e9, 2.5e9, 10e9, 40e9};  // 0: unlimited
    for (RankLink& l : links) l.egress_bps = rates[rng() % 5], l.ingress_bps = rates[rng() % 5];
    SimOptions o;
    o.links = links;
    for (RankLink& l : o.links) {  // the Executor-based simulator has no unlimited link: a very fast one
      if (l.egress_bps == 0) l.egress_bps = 1e15;
      if (l.ingress_bps == 0) l.ingress_bps = 1e15;
    }
    const SimResult old = simulate(p, o);
    FlowModel fast;
    fast.bps = 1e15;
    SimGraph g = sim_graph(p, fast);
    g.rank_links = links;
    const GraphSimRun now = simulate_graph(g);
    ASSERT_EQ(old.iteration_end.size(), now.iteration_end.size());
    for (std::size_t i = 0; i < old.iteration_end.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(now.iteration_end[i]), static_cast<double>(old.iteration_end[i]),
                  1e-4 * static_cast<double>(old.iteration_end[i]) + 100)
          << "trial " << trial << " iteration " << i << "\n" << text;
    }
  }
}

// Three messages leave rank 0 together over its 10 Gb/s egress; flow a can go no
// faster than 2 Gb/s, so b and c share the other 8. 1 MB each: b and c end at
// 2 ms (4 Gb/s each); a has sent 0.5 MB by then and goes on alone at its own
// 2 Gb/s: 4 ms. Then max-min on the ingress: d's 1 MB to rank 2 with e's, whose
// receiver takes 1 Gb/s.
TEST(GraphSim, AMessageCappedByItsFlowLeavesItsShareToTheOthers) {
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 1
ranks: [{id: 0}, {id: 1}, {id: 2}]
flows: [{id: a, src: 0, dst: 1}, {id: b, src: 0, dst: 1}, {id: c, src: 0, dst: 2}]
ops:
  - {id: x, type: send, flow: a, bytes: 1MB}
  - {id: y, type: send, flow: b, bytes: 1MB}
  - {id: z, type: send, flow: c, bytes: 1MB}
)");
  FlowModel link;
  link.bps = 100e9;
  SimGraph g = sim_graph(p, link);
  g.flows[p.flow_by_id.at("a")].bps = 2e9;
  g.rank_links = {{10e9, 0}, {0, 0}, {0, 0}};
  GraphSimOptions so;
  so.record = true;
  const GraphSimRun r = simulate_graph(g, so);
  EXPECT_NEAR(static_cast<double>(r.at(p.op_by_id.at("y"), 0).end), 2e6, 1e3);
  EXPECT_NEAR(static_cast<double>(r.at(p.op_by_id.at("z"), 0).end), 2e6, 1e3);
  EXPECT_NEAR(static_cast<double>(r.at(p.op_by_id.at("x"), 0).end), 4e6, 1e3);
  // Rank 1's ingress at 1 Gb/s: a (2 Gb/s cap) and b share it, 0.5 each, while c
  // takes the rest of the egress (9 Gb/s): c ends at 0.89 ms; then a and b go on
  // at 0.5 each until 16 ms.
  g.rank_links = {{10e9, 0}, {0, 1e9}, {0, 0}};
  const GraphSimRun s = simulate_graph(g, so);
  EXPECT_NEAR(static_cast<double>(s.at(p.op_by_id.at("z"), 0).end), 8e6 / 9, 1e3);
  EXPECT_NEAR(static_cast<double>(s.at(p.op_by_id.at("x"), 0).end), 16e6, 1e3);
  EXPECT_NEAR(static_cast<double>(s.at(p.op_by_id.at("y"), 0).end), 16e6, 1e3);
}

TEST(GraphSim, ADeadlockIsReportedNotHung) {
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 1
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}, {id: g, src: 1, dst: 0}]
ops:
  - {id: a, type: send, flow: f, bytes: 10, after: [recv:b@-1]}
  - {id: b, type: send, flow: g, bytes: 10, after: [recv:a]}
)");
  SimGraph g = sim_graph(p, FlowModel{});
  g.iterations = 3;
  EXPECT_NO_THROW(simulate_graph(g));
  // The same graph with the cross-iteration edge made same-iteration cannot start.
  g.deps[0].iterations_back = 0;
  EXPECT_THROW(simulate_graph(g), std::runtime_error);
  // A dependency further back than the simulator's successor lists can hold.
  g.deps[0].iterations_back = 1U << 31;
  EXPECT_THROW(simulate_graph(g), std::invalid_argument);
}

// Critical path and verdict on DAGs with known answers.
TEST(Diagnosis, CriticalPathOfAComputeBoundAndACommunicationBoundChain) {
  const auto chain = [](const std::string& first, const std::string& bytes) { return test::one_message(first, bytes, 4); };
  SimOptions o;
  o.link_bps = 8e9;
  // Rank 0 starts its next iteration once its message has left, so in the
  // steady state an iteration takes rank 0's compute and send, while the path
  // within an iteration runs on to rank 1's compute.
  {
    const Profile p = chain("10ms", "1MB");  // 10 + 1 + 2 ms, 12 of them compute
    const Diagnosis d = diagnose(input_of(p, o));
    EXPECT_NEAR(static_cast<double>(d.path.length), 13e6, 13e6 * 0.01);
    EXPECT_NEAR(static_cast<double>(d.path.compute), 12e6, 12e6 * 0.01);
    EXPECT_NEAR(static_cast<double>(d.path.network + d.path.receipt), 1e6, 1e6 * 0.02);
    EXPECT_EQ(d.verdict.bound, "compute");
    EXPECT_TRUE(d.reproduces);
    ASSERT_FALSE(d.path.top.empty());
    EXPECT_EQ(p.ops[d.path.top[0].op].id, "c");
  }
  {
    const Profile p = chain("1ms", "100MB");  // 1 + 100 + 2 ms
    const Diagnosis d = diagnose(input_of(p, o));
    EXPECT_NEAR(static_cast<double>(d.path.length), 103e6, 103e6 * 0.01);
    EXPECT_EQ(d.verdict.bound, "communication");
    EXPECT_GT(d.verdict.communication_share, 0.95);
    EXPECT_NEAR(static_cast<double>(d.measured), 101e6, 101e6 * 0.01);
    EXPECT_NEAR(static_cast<double>(d.verdict.no_network), 2e6, 2e6 * 0.02);  // rank 1's compute
    ASSERT_FALSE(d.compression.empty());
    // Compressed 4x, rank 0's cycle is 1 ms, 12.5 ms compressing (half of 0.25
    // ns a byte) and 25 ms sending: 62.5 ms less than 101.
    ASSERT_EQ(d.compression[0].saving.size(), 3u);
    EXPECT_NEAR(static_cast<double>(d.compression[0].saving[1]), 62.5e6, 0.5e6);
  }
}

TEST(Diagnosis, FlowFitsRecoverRateCostAndLatency) {
  // Two sizes back to back on one flow, and a third alone.
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 6
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}]
ops:
  - {id: a, type: send, flow: f, bytes: 1MB}
  - {id: b, type: send, flow: f, bytes: 4MB}
  - {id: c, type: send, flow: f, bytes: 2MB}
  - {id: w, type: compute, rank: 0, duration: 5ms, after: [b]}
  - {id: e, type: send, flow: f, bytes: 3MB, after: [w]}
)");
  FlowModel link;
  link.bps = 4e9;
  link.per_message = 20 * kMicro;
  link.latency = 100 * kMicro;
  GraphSimOptions so;
  so.record = true;
  const SimGraph g = sim_graph(p, link);
  const GraphSimRun r = simulate_graph(g, so);
  Timeline t;
  t.iterations = 6;
  t.ops.assign(p.ops.size(), std::vector<Instance>(6));
  for (std::size_t i = 0; i < 6; ++i) {
    Nanos base = r.makespan;  // times are relative to the iteration's first start
    for (OpIndex o = 0; o < p.ops.size(); ++o) base = std::min(base, r.at(o, i).ready);
    for (OpIndex o = 0; o < p.ops.size(); ++o) {
      const SimInstance& x = r.at(o, i);
      t.ops[o][i] = {(p.ops[o].type == OpType::send ? x.ready : x.start) - base,
                     (p.ops[o].type == OpType::send ? x.received : x.end) - base};
    }
  }
  const auto fits = fit_flows(p, t, 0);
  ASSERT_TRUE(fits[0].fitted);
  EXPECT_NEAR(fits[0].bps, 4e9, 4e9 * 0.01);
  EXPECT_NEAR(static_cast<double>(fits[0].per_message), 20e3, 2e3);
  EXPECT_NEAR(static_cast<double>(fits[0].latency), 100e3, 2e3);
}

// A ring with one slow rank: the diagnosis names it first, and its predicted
// saving is the difference between the job with and without the slowdown.
TEST(Diagnosis, NamesAnInjectedStragglerAndItsCost) {
  Profile p = test::bundled_profile("resnet50-ring-4.yaml");
  p.iterations = 6;
  SimOptions clean;
  clean.links = uniform_links(4, 100e9);  // at 10 Gb/s the ring is bound by its links, and a slow rank costs 2%
  SimOptions slow = clean;
  slow.slowdown = {1, 1, 1.5, 1};
  const Diagnosis d = diagnose(input_of(p, slow));
  EXPECT_TRUE(d.reproduces) << d.sim_error;
  ASSERT_FALSE(d.stragglers.empty());
  EXPECT_EQ(d.stragglers[0].rank, 2u);
  EXPECT_TRUE(d.stragglers[0].named);
  EXPECT_NEAR(d.stragglers[0].score, 1 - 1 / 1.5, 0.02);
  for (std::size_t k = 1; k < d.stragglers.size(); ++k) {
    EXPECT_FALSE(d.stragglers[k].named) << d.stragglers[k].rank;
    EXPECT_GT(d.stragglers[0].waited_on, d.stragglers[k].waited_on) << d.stragglers[k].rank;
  }
  const double with = mean_from(simulate(p, slow).iteration_times(), 1);
  const double without = mean_from(simulate(p, clean).iteration_times(), 1);
  EXPECT_NEAR(static_cast<double>(d.stragglers[0].without), with - without, 0.1 * (with - without));

  const Diagnosis c = diagnose(input_of(p, clean));
  for (const Straggler& s : c.stragglers) EXPECT_FALSE(s.named) << s.rank;
  for (const SlowLink& l : c.links) EXPECT_FALSE(l.named) << l.a << "-" << l.b;
}

// The what-ifs run on several threads, each on its own copy of the graph: the
// diagnosis is the same whatever their number (ThreadSanitizer runs this too).
TEST(Diagnosis, TheWhatIfsGiveTheSameAnswerOnAnyNumberOfThreads) {
  Profile p = test::bundled_profile("resnet50-ps-4w2s.yaml");
  p.iterations = 4;
  SimOptions slow;
  slow.links = uniform_links(p.ranks.size(), 25e9);
  slow.slowdown.assign(p.ranks.size(), 1);
  slow.slowdown[1] = 1.4;
  const DiagnosisInput in = input_of(p, slow);
  DiagnosisOptions one;
  one.threads = 1;
  one.compress_candidates = 6;
  const std::string expected = diagnosis_json(diagnose(in, one), p).dump();
  for (unsigned threads : {2U, 5U, 64U}) {
    DiagnosisOptions many = one;
    many.threads = threads;
    // Progress is told one call at a time, each stage counting up to its total.
    std::map<std::string, std::pair<std::size_t, std::size_t>> told;  // stage: last done, total
    bool in_call = false, overlapped = false, out_of_order = false;
    many.progress = [&](const char* stage, std::size_t done, std::size_t total) {
      overlapped = overlapped || in_call;
      in_call = true;
      auto& [last, of] = told[stage];
      out_of_order = out_of_order || done != last + 1 || (of != 0 && of != total);
      last = done, of = total;
      in_call = false;
    };
    EXPECT_EQ(diagnosis_json(diagnose(in, many), p).dump(), expected) << threads << " threads";
    EXPECT_FALSE(overlapped);
    EXPECT_FALSE(out_of_order);
    EXPECT_EQ(told.count("compression"), 1u);
    for (const auto& [stage, at] : told) EXPECT_EQ(at.first, at.second) << stage;
  }
}

TEST(Diagnosis, NamesAnInjectedSlowLinkAndItsCost) {
  Profile p = test::bundled_profile("resnet50-ring-4.yaml");
  p.iterations = 6;
  SimOptions clean;
  clean.links = uniform_links(4, 10e9);
  SimOptions slow = clean;
  slow.links[1].egress_bps = 2e9;  // rank 1's only flow goes to rank 2
  const Diagnosis d = diagnose(input_of(p, slow));
  ASSERT_FALSE(d.links.empty());
  EXPECT_EQ(d.links[0].a, "h1");
  EXPECT_EQ(d.links[0].b, "h2");
  EXPECT_TRUE(d.links[0].named);
  EXPECT_NEAR(d.links[0].rate_bps, 2e9, 2e9 * 0.05);
  for (std::size_t k = 1; k < d.links.size(); ++k) EXPECT_FALSE(d.links[k].named);
  for (const Straggler& s : d.stragglers) EXPECT_FALSE(s.named) << s.rank;
  const double with = mean_from(simulate(p, slow).iteration_times(), 1);
  const double without = mean_from(simulate(p, clean).iteration_times(), 1);
  EXPECT_NEAR(static_cast<double>(d.links[0].without), with - without, 0.1 * (with - without));
}

// A send that waits for its own rank's send goes once the kernel has that one:
// its measured start is not a delay of its own. (Counted as one, it doubled the
// compute before the first send: a built DDP profile simulated +94%.)
TEST(Diagnosis, ASendAfterItsRanksOwnSendCarriesNoExtraDelay) {
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 6
ranks: [{id: 0}, {id: 1}, {id: 2}]
flows: [{id: a, src: 0, dst: 1}, {id: b, src: 0, dst: 2}, {id: c, src: 1, dst: 0}, {id: d, src: 2, dst: 0}]
ops:
  - {id: work, type: compute, rank: 0, duration: 5ms}
  - {id: first, type: send, flow: a, bytes: 48, after: [work]}
  - {id: second, type: send, flow: b, bytes: 64KB, after: [first]}
  - {id: back1, type: send, flow: c, bytes: 64KB, after: [recv:first]}
  - {id: back2, type: send, flow: d, bytes: 64KB, after: [recv:second]}
)");
  const Diagnosis d = diagnose(input_of(p, SimOptions{}));
  EXPECT_TRUE(d.reproduces) << d.sim_error;
  EXPECT_LT(std::abs(d.sim_error), 0.02) << d.simulated << " against " << d.measured;
}

// Ranks of one role whose profiles differ in shape (a wait that became a compute
// op on one rank only, as `profile build` does): the straggler is still compared
// with its role's ranks, not with itself alone.
TEST(Diagnosis, AStragglerOfAnotherShapeIsComparedWithItsRole) {
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 6
ranks: [{id: 0}, {id: 1}, {id: 2}]
flows: [{id: f01, src: 0, dst: 1}, {id: f12, src: 1, dst: 2}, {id: f20, src: 2, dst: 0}]
ops:
  - {id: c0, type: compute, rank: 0, duration: 10ms}
  - {id: s0, type: send, flow: f01, bytes: 64KB, after: [c0]}
  - {id: c1, type: compute, rank: 1, duration: 10ms}
  - {id: s1, type: send, flow: f12, bytes: 64KB, after: [c1, recv:s0]}
  - {id: c2a, type: compute, rank: 2, duration: 6ms}
  - {id: c2b, type: compute, rank: 2, duration: 4ms, after: [c2a]}
  - {id: s2, type: send, flow: f20, bytes: 64KB, after: [c2b, recv:s1]}
)");
  SimOptions slow;
  slow.slowdown = {1, 1, 2};
  const Diagnosis d = diagnose(input_of(p, slow));
  EXPECT_TRUE(d.reproduces) << d.sim_error;
  ASSERT_FALSE(d.stragglers.empty());
  EXPECT_EQ(d.stragglers[0].rank, 2u);
  EXPECT_TRUE(d.stragglers[0].named);
  EXPECT_NEAR(static_cast<double>(d.stragglers[0].peers_compute), 10e6, 0.5e6);
  EXPECT_NEAR(d.stragglers[0].score, 0.5, 0.03);
  // Without it, rank 2 computes 10 ms as the others do: the iteration loses its 10 ms more.
  EXPECT_NEAR(static_cast<double>(d.stragglers[0].without), 10e6, 1e6);
}

TEST(Diagnosis, RejectsATimelineWithoutIterations) {
  const Profile p = test::bundled_profile("mlp-ring-2.yaml");
  DiagnosisInput in;
  in.profile = p;
  EXPECT_THROW(diagnose(in), std::invalid_argument);
}

}  // namespace
}  // namespace tw

namespace tw {
namespace {

TEST(Mitigation, RingOrderAvoidsTheSlowPairAndCompressionIsTheFallback) {
  Profile p = test::bundled_profile("resnet50-ring-4.yaml");
  p.iterations = 6;
  EXPECT_EQ(ring_next(p), (std::vector<RankId>{1, 2, 3, 0}));
  EXPECT_TRUE(ring_next(test::bundled_profile("resnet50-ps-4w2s.yaml")).empty());
  SimOptions slow;
  slow.links = uniform_links(4, 10e9);
  slow.links[1].egress_bps = 2e9;
  const DiagnosisInput in = input_of(p, slow);
  const Diagnosis d = diagnose(in);
  std::string why;
  const auto m = mitigate(in, d, DiagnosisOptions{}, why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(m->kind, "reorder");
  EXPECT_GT(m->predicted, 0);
  const std::vector<RankId> next = ring_next(m->profile);
  ASSERT_EQ(next.size(), 4u);
  for (RankId r = 0; r < 4; ++r) {
    // Rank r of the new profile runs on host r: hosts 1 and 2 are no neighbours.
    const std::pair<RankId, RankId> e{std::min(r, next[r]), std::max(r, next[r])};
    EXPECT_NE(e, (std::pair<RankId, RankId>{1, 2})) << r;
  }
  // Every op and flow kept, each on its renamed rank.
  ASSERT_EQ(m->profile.ops.size(), p.ops.size());
  for (OpIndex o = 0; o < p.ops.size(); ++o) EXPECT_EQ(m->profile.ops[o].rank, m->perm[p.ops[o].rank]);

  // No slow link: the top tensor, compressed.
  SimOptions clean;
  clean.links = uniform_links(4, 10e9);
  const DiagnosisInput in2 = input_of(p, clean);
  const Diagnosis d2 = diagnose(in2);
  const auto c = mitigate(in2, d2, DiagnosisOptions{}, why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->kind, "compress");
  Bytes before = 0, after = 0;
  for (OpIndex o = 0; o < p.ops.size(); ++o) {
    if (p.ops[o].tensor != d2.compression[0].tensor) continue;
    before += p.ops[o].bytes;
    after += c->profile.ops[o].bytes;
  }
  EXPECT_GT(before, 0u);
  EXPECT_NEAR(static_cast<double>(after), static_cast<double>(before) / 4, static_cast<double>(before) * 0.01);
}

// Forward waiting per layer: the next forward's layer order is the urgency order,
// on every link; the analysis predicts a saving, and the mitigation is that order.
TEST(Priority, UrgencyIsTheNextForwardsLayerOrder) {
  std::string text = "model: layers\ndtype: float32\nfwd: 80ms\nbwd: 40ms\ntensors:\n";
  for (int l = 0; l < 6; ++l) text += "  - {name: l" + std::to_string(l) + ".weight, shape: [262144]}\n";
  const Model model = load_model_text(text, "layers.yaml");
  SynthOptions so;
  so.pattern = Pattern::parameter_server;
  so.ranks = 3;
  so.iterations = 6;
  so.overlap_forward = true;
  Profile p = synthesize(model, so);
  EXPECT_FALSE(p.iteration_barrier);
  const auto in_layer_order = [&p](const auto& priority_of) {
    for (RankId w = 0; w < 3; ++w) {
      for (int l = 0; l + 1 < 6; ++l) {
        const auto pull = [&](int layer) { return p.op_by_id.at("r3.pull.l" + std::to_string(layer) + ".weight.r" + std::to_string(w)); };
        const auto push = [&](int layer) { return p.op_by_id.at("r" + std::to_string(w) + ".push.l" + std::to_string(layer) + ".weight"); };
        EXPECT_LT(priority_of(pull(l)), priority_of(pull(l + 1))) << w << " " << l;
        EXPECT_LT(priority_of(push(l)), priority_of(push(l + 1))) << w << " " << l;
      }
    }
  };
  const auto pr = urgency_priorities(p, std::vector<FlowModel>(p.flows.size(), FlowModel{1e9}));
  in_layer_order([&pr](OpIndex op) { return pr[op]; });
  Profile q = p;
  EXPECT_EQ(prioritize_sends(q, pr), static_cast<std::size_t>(std::count_if(pr.begin(), pr.end(), [](std::uint32_t x) { return x != 0; })));
  EXPECT_EQ(prioritize_sends(q, pr), 0u);
  // On shared 1 Gbit/s links the urgency order is faster, and the analysis says so.
  SimOptions o;
  o.links = uniform_links(p.ranks.size(), 1e9);
  const DiagnosisInput in = input_of(p, o);
  const Diagnosis d = diagnose(in);
  ASSERT_TRUE(d.order.tried);
  EXPECT_GT(d.order.changed, 0u);
  EXPECT_LT(d.order.after, d.order.before);
  SimGraph fifo = sim_graph(p, FlowModel{1e9}), urgent = sim_graph(q, FlowModel{1e9});
  fifo.rank_links = urgent.rank_links = uniform_links(p.ranks.size(), 1e9);
  EXPECT_LT(simulate_graph(urgent).mean_iteration(1), 0.9 * simulate_graph(fifo).mean_iteration(1));
  std::string why;
  const auto m = mitigate(in, d, DiagnosisOptions{}, why);
  ASSERT_TRUE(m) << why;
  ASSERT_EQ(m->kind, "priority") << m->description;
  EXPECT_EQ(m->predicted, d.order.before - d.order.after);
  in_layer_order([&m](OpIndex op) { return m->profile.ops[op].priority; });
}

TEST(Mitigation, CompressSendsDividesBytesAndChargesTheSender) {
  Profile p = test::bundled_profile("resnet50-ring-4.yaml");
  const Profile original = p;
  std::string tensor;
  for (const Op& op : p.ops) {
    if (op.type == OpType::send && !op.tensor.empty()) tensor = op.tensor;
  }
  ASSERT_FALSE(tensor.empty());
  const std::size_t n = compress_sends(p, tensor, 10, 2.0);
  std::size_t expected = 0;
  for (OpIndex o = 0; o < p.ops.size(); ++o) {
    const Op& was = original.ops[o];
    const Op& now = p.ops[o];
    if (was.type != OpType::send || was.tensor != tensor) {
      EXPECT_EQ(now.bytes, was.bytes) << o;
      EXPECT_EQ(now.gap, was.gap) << o;
      continue;
    }
    ++expected;
    EXPECT_EQ(now.bytes, (was.bytes + 9) / 10) << o;
    EXPECT_EQ(now.gap, was.gap + static_cast<Nanos>(2 * was.bytes)) << o;
  }
  EXPECT_EQ(n, expected);
  EXPECT_GT(n, 0u);
  EXPECT_EQ(compress_sends(p, "no such tensor", 4, 0.25), 0u);
  // Compressing a 1-byte message keeps one byte.
  Profile q = original;
  for (Op& op : q.ops) {
    if (op.type == OpType::send && op.tensor == tensor) op.bytes = 1;
  }
  compress_sends(q, tensor, 4, 0);
  for (const Op& op : q.ops) {
    if (op.type == OpType::send && op.tensor == tensor) {
      EXPECT_EQ(op.bytes, 1u);
    }
  }
}

}  // namespace
}  // namespace tw

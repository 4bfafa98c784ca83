// The controller's pure parts: clock-offset estimation and tracking, run
// progress, control settings, and the comparison engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tensorwire/analysis/compare.hpp"
#include "tensorwire/controller/clock_sync.hpp"
#include "tensorwire/protocol/run_settings.hpp"
#include "tensorwire/util/token.hpp"
#include "tensorwire/util/host_port.hpp"
#include "tensorwire/controller/run_progress.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

TEST(ClockSync, KeepsTheShortestRoundTripAndItsBound) {
  // The agent's clock is 1000 ns ahead. Sample 1 has a slow return path (biased),
  // sample 2 the shortest round trip.
  const std::vector<ClockSample> s = {
      {0, 1000 + 100, 900},   // rtt 900: estimate 1100 - 450 = 650
      {2000, 3000 + 50, 2101},  // rtt 101: estimate 3050 - 2050 = 1000
      {5000, 6000 + 300, 5800},
  };
  const auto e = estimate_clock_offset(s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rtt, 101);
  EXPECT_EQ(e->offset, 1000);
  EXPECT_EQ(e->bound, 51);  // half the round trip, rounded up
  EXPECT_EQ(e->samples, 3u);
  EXPECT_EQ(e->to_controller(11000), 10000);
  EXPECT_EQ(e->to_agent(10000), 11000);
}

TEST(ClockSync, TheTrueOffsetIsAlwaysWithinTheBound) {
  // Whatever the (asymmetric) delays, the agent's stamp lies inside the round
  // trip, so the estimate is off by at most the bound.
  const Nanos truth = -123456;
  for (Nanos out = 0; out < 50; out += 7) {
    for (Nanos back = 0; back < 50; back += 11) {
      const Nanos sent = 1000000;
      const ClockSample x{sent, sent + out + truth, sent + out + back};
      const auto e = estimate_clock_offset(std::vector<ClockSample>{x});
      ASSERT_TRUE(e);
      EXPECT_LE(std::llabs(e->offset - truth), e->bound) << out << " " << back;
    }
  }
}

TEST(ClockSync, NoUsableSample) {
  EXPECT_FALSE(estimate_clock_offset(std::vector<ClockSample>{}));
  EXPECT_FALSE(estimate_clock_offset(std::vector<ClockSample>{{100, 5, 50}}));  // the clock stepped back
}

TEST(ClockTrack, InterpolatesBetweenEstimatesAndHoldsOutside) {
  ClockTrack t;
  EXPECT_EQ(t.offset_at(123), 0);
  t.add(1'000'000, {100, 10, 20, 8});
  t.add(2'000'000, {300, 30, 60, 8});
  // Estimate k holds at agent time at_k + offset_k: 1'000'100 and 2'000'300.
  EXPECT_EQ(t.offset_at(0), 100);
  EXPECT_EQ(t.offset_at(1'000'100), 100);
  EXPECT_EQ(t.offset_at(1'500'200), 200);
  EXPECT_EQ(t.offset_at(9'000'000), 300);
  EXPECT_EQ(t.to_controller(1'500'200), 1'500'000);
  EXPECT_EQ(t.max_bound(), 30);
  EXPECT_EQ(t.drift(), 200);
}

TEST(RunProgress, AnIterationIsDoneWhenEveryRankReportedIt) {
  RunProgress p(2, 3);
  EXPECT_TRUE(p.iteration(0, 0, 100, 200));
  EXPECT_EQ(p.done(), 0u);
  EXPECT_TRUE(p.iteration(0, 1, 200, 320));
  EXPECT_TRUE(p.iteration(1, 0, 90, 210));
  ASSERT_EQ(p.done(), 1u);
  EXPECT_EQ(p.job_iterations()[0], (std::pair<Nanos, Nanos>{90, 210}));
  EXPECT_FALSE(p.iteration(1, 2, 0, 1));  // out of order
  EXPECT_FALSE(p.iteration(2, 0, 0, 1));  // no such rank
  EXPECT_TRUE(p.iteration(1, 1, 210, 330));
  EXPECT_EQ(p.done(), 2u);
  EXPECT_EQ(p.rank_done(0), 2u);
  EXPECT_FALSE(p.finished());
  p.bytes_sent(0, 1000);
  p.bytes_sent(1, 500);
  p.bytes_sent(1, 400);  // counters only grow
  EXPECT_EQ(p.total_bytes_sent(), 1500u);
  EXPECT_DOUBLE_EQ(p.bytes_per_second(), 1500.0 * 1e9 / 240.0);
}

TEST(Control, SettingsRoundTripAndBadFieldsAreNamed) {
  RunSettings s;
  s.iterations = 7;
  s.open_loop = true;
  s.open_loop_offsets = {1, 2, 3};
  s.open_loop_period = 99;
  s.spin = 20000;
  s.read_gap = 15000;
  s.read_nap = 200000;
  s.delay = 5;
  s.tx_timestamps = false;
  const RunSettings t = run_settings_from_json(to_json(s));
  EXPECT_EQ(t.iterations, 7u);
  EXPECT_EQ(t.read_gap, 15000);
  EXPECT_EQ(t.read_nap, 200000);
  EXPECT_EQ(t.open_loop_offsets, s.open_loop_offsets);
  EXPECT_EQ(t.open_loop_period, 99);
  EXPECT_FALSE(t.tx_timestamps);
  nlohmann::json j = to_json(s);
  j.erase("spin_ns");
  try {
    run_settings_from_json(j);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "settings: missing \"spin_ns\"");
  }
  j = to_json(s);
  j["iterations"] = "many";
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  // A read gap longer than kMostReadGap would spin a flow for that long.
  j = to_json(s);
  j["read_gap_ns"] = kMostReadGap + 1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  j["read_gap_ns"] = -1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  // Nor a nap longer than kMostReadNap: what arrives meanwhile waits.
  j = to_json(s);
  j["read_nap_ns"] = kMostReadNap + 1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  j["read_nap_ns"] = -1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  j["read_nap_ns"] = "long";
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  j.erase("read_nap_ns");  // from a controller before it: no naps
  EXPECT_EQ(run_settings_from_json(j).read_nap, 0);
  // The congestion control travels as a name the kernel could know, or empty.
  s.congestion_control = "cubic";
  EXPECT_EQ(run_settings_from_json(to_json(s)).congestion_control, "cubic");
  j = to_json(s);
  j.erase("congestion_control");  // from a controller before it: each host's default
  EXPECT_EQ(run_settings_from_json(j).congestion_control, "");
  j["congestion_control"] = "cubic; rm -rf /";
  try {
    run_settings_from_json(j);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "settings: \"congestion_control\": a congestion control's name is letters, digits, '_' and '-'");
  }
  j["congestion_control"] = std::string(16, 'a');
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  // Automatic I/O threads (0) travel with the agents sharing the machine; a
  // controller from before sends no count (the agent counts its roster), and
  // more threads than kMaxIoThreads are refused.
  s = {};
  s.io_threads = 0;
  s.machine_agents = 3;
  EXPECT_EQ(run_settings_from_json(to_json(s)).io_threads, 0U);
  EXPECT_EQ(run_settings_from_json(to_json(s)).machine_agents, 3U);
  j = to_json(s);
  j.erase("machine_agents");
  EXPECT_EQ(run_settings_from_json(j).machine_agents, 0U);
  j["io_threads"] = kMaxIoThreads + 1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  j["io_threads"] = -1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  // The batch policy travels; a controller from before it sends none (normal
  // scheduling); and it cannot come with SCHED_FIFO.
  s = {};
  s.sched_batch = true;
  EXPECT_TRUE(run_settings_from_json(to_json(s)).sched_batch);
  j = to_json(s);
  j.erase("sched_batch");
  EXPECT_FALSE(run_settings_from_json(j).sched_batch);
  j["sched_batch"] = 1;
  EXPECT_THROW(run_settings_from_json(j), std::runtime_error);
  j["sched_batch"] = true;
  j["realtime"] = true;
  try {
    run_settings_from_json(j);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "settings: \"realtime\" and \"sched_batch\" exclude each other");
  }
}

TEST(Control, TokensAndAddresses) {
  const std::string a = random_token(), b = random_token();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(split_host_port("10.0.0.1:80", "x"), (std::pair<std::string, std::uint16_t>{"10.0.0.1", 80}));
  EXPECT_EQ(split_host_port("[::1]:9", "x").first, "::1");
  EXPECT_THROW(split_host_port("host", "--listen"), std::invalid_argument);
  EXPECT_THROW(split_host_port("host:99999", "--listen"), std::invalid_argument);
  EXPECT_THROW(split_host_port("host:8x", "--listen"), std::invalid_argument);
}

Profile two_rank_profile() {
  ProfileLoad l = load_profile_text(R"(version: 1
iterations: 2
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}]
ops:
  - {id: c, type: compute, rank: 0, duration: 1ms}
  - {id: s, type: send, flow: f, bytes: 1MB, after: [c]}
  - {id: d, type: compute, rank: 1, duration: 1ms, after: [recv:s]}
)",
                                    "t.yaml");
  EXPECT_TRUE(l.ok()) << (l.diagnostics.empty() ? "" : l.diagnostics[0].str());
  return *l.profile;
}

Timeline timeline(std::vector<Nanos> iterations, Nanos send_time) {
  Timeline t;
  t.source = "t";
  t.iterations = iterations.size();
  t.iteration = iterations;
  t.ops.assign(3, std::vector<Instance>(iterations.size()));
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    t.ops[0][i] = {0, 1000};
    t.ops[1][i] = {1000, 1000 + send_time};
    t.ops[2][i] = {1000 + send_time + 10, 2000 + send_time + 10};
  }
  t.flow_bytes = {2'000'000};
  t.flow_busy = {2 * send_time};
  return t;
}

TEST(Compare, ErrorsAreReplayMinusReference) {
  const Profile p = two_rank_profile();
  const Comparison c = compare_timelines(p, timeline({1000, 2000}, 500), timeline({1100, 1800, 99}, 1000));
  EXPECT_EQ(c.iterations, 2u);  // only the common iterations
  EXPECT_EQ(c.iteration_pct.n, 2u);
  EXPECT_DOUBLE_EQ(c.iteration_pct.mean, 0.0);  // +10% and -10%
  EXPECT_DOUBLE_EQ(c.iteration_pct.max_abs, 10.0);
  EXPECT_DOUBLE_EQ(c.completion_pct.p50, 100.0);  // messages took twice as long
  EXPECT_EQ(c.start_offset_ns.n, 6u);
  EXPECT_DOUBLE_EQ(c.start_offset_ns.max_abs, 500.0);  // d started 500 ns later
  ASSERT_EQ(c.flows.size(), 1u);
  EXPECT_DOUBLE_EQ(c.flows[0].error_pct, -50.0);
  ASSERT_FALSE(c.worst_messages.empty());
  EXPECT_EQ(p.ops[c.worst_messages[0].op].id, "s");
  // Edges: c -> s has the same slack on both sides; s -> d too (10 ns).
  ASSERT_EQ(c.drifted_edges.size(), 2u);
  EXPECT_EQ(c.drifted_edges[0].drift, 0);
  const std::string text = comparison_text(p, c);
  EXPECT_NE(text.find("iteration time (job-wide)"), std::string::npos);
  EXPECT_NE(text.find("+100.0%"), std::string::npos);
}

TEST(Compare, ErrorStatsUseNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const ErrorStats s = error_stats(v);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p95, 95);
  EXPECT_EQ(s.p99, 99);
  EXPECT_EQ(s.max_abs, 100);
  EXPECT_EQ(error_stats({}).n, 0u);
}

}  // namespace
}  // namespace tw

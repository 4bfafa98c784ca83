// The run policy: replay options to the settings every agent replays with, and
// time dilation. One derivation for `run`, `agent` and `replay --local`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/launch/run_settings.hpp"
#include "tensorwire/launch/time_scale.hpp"
#include "tensorwire/protocol/control_messages.hpp"

namespace tw {
namespace {

Profile mlp() { return load_profile_or_throw(std::string(TW_SOURCE_DIR) + "/traffic_profiles/mlp-ring-2.yaml"); }

TEST(RunSettings, SpinsUnlessLocalAgentsOrTheirThreadsCrowdTheCores) {
  ReplayOptions o;
  EXPECT_EQ(agents_on_this_machine(3, 0, 3), 3u) << "--local 3";
  EXPECT_EQ(agents_on_this_machine(0, 2, 3), 3u) << "a testbed's hosts share this machine";
  EXPECT_EQ(agents_on_this_machine(0, 0, 3), 0u) << "--hosts or --expect: elsewhere";
  EXPECT_EQ(spin_us_for(o, {}), 20.0) << "one agent, or agents elsewhere";
  EXPECT_EQ(spin_us_for(o, {.local_agents = 3, .cores = 4}), 20.0);
  EXPECT_EQ(spin_us_for(o, {.local_agents = 4, .cores = 4}), 0.0);
  o.io_threads = 2;
  EXPECT_EQ(spin_us_for(o, {.local_agents = 2, .cores = 4}), 20.0) << "as many I/O threads as cores";
  EXPECT_EQ(spin_us_for(o, {.local_agents = 3, .cores = 4}), 0.0) << "six I/O threads on four cores";
  EXPECT_EQ(spin_us_for(o, {}), 20.0) << "agents elsewhere, whatever their threads";
  o.io_threads = 1;
  o.spin_us = 5;
  EXPECT_EQ(spin_us_for(o, {.local_agents = 8, .cores = 2}), 5.0) << "as asked";
}

TEST(RunSettings, AutomaticIoThreadsFollowTheFlowsUpToTheAgentsShareOfTheCores) {
  EXPECT_EQ(automatic_io_threads(2, 64, 1), 1U) << "a ring's rank: one thread, no hand-over between threads";
  EXPECT_EQ(automatic_io_threads(4, 64, 1), 1U);
  EXPECT_EQ(automatic_io_threads(5, 64, 1), 2U);
  EXPECT_EQ(automatic_io_threads(16, 64, 1), 4U);
  EXPECT_EQ(automatic_io_threads(16, 2, 1), 2U) << "at most the cores";
  EXPECT_EQ(automatic_io_threads(16, 2, 2), 1U) << "two agents on two cores: one core each";
  EXPECT_EQ(automatic_io_threads(256, 64, 8), 8U) << "eight ranks of a host";
  EXPECT_EQ(automatic_io_threads(256, 32, 0), 32U) << "0 agents counts as 1";
  EXPECT_EQ(automatic_io_threads(0, 64, 1), 1U) << "at least one";
  EXPECT_EQ(automatic_io_threads(100000, 4096, 1), kMaxIoThreads);
  EXPECT_EQ(automatic_io_threads(16, 0, 1), 1U) << "cores unknown";
}

TEST(RunSettings, IoThreadsAreAutomaticUnlessAskedAndLocalAgentsAreCounted) {
  ReplayOptions o;
  EXPECT_EQ(o.io_threads, 0U) << "automatic by default";
  RunSettings s = make_run_settings(mlp(), o, {.local_agents = 2, .cores = 2});
  EXPECT_EQ(s.io_threads, 0U);
  EXPECT_EQ(s.machine_agents, 2U) << "--local and --testbed agents share this machine";
  s = make_run_settings(mlp(), o, {});
  EXPECT_EQ(s.machine_agents, 0U) << "elsewhere: counted per host";
  const auto args = agent_arguments(o, {.local_agents = 2, .cores = 2});
  EXPECT_EQ(std::count(args.begin(), args.end(), "--io-threads"), 0) << "automatic: the agents decide";
  o.io_threads = 3;
  EXPECT_EQ(make_run_settings(mlp(), o, {}).io_threads, 3U);
  const auto three = agent_arguments(o, {});
  const auto at = std::find(three.begin(), three.end(), "--io-threads");
  ASSERT_NE(at, three.end());
  EXPECT_EQ(*std::next(at), "3");
  o.io_threads = kMaxIoThreads + 1;
  EXPECT_THROW(make_run_settings(mlp(), o, {}), std::invalid_argument);
  // Automatic threads are at most the agents' share of the cores: they crowd
  // them only where the agents alone do.
  o.io_threads = 0;
  EXPECT_EQ(spin_us_for(o, {.local_agents = 3, .cores = 8}), 20.0);
  EXPECT_EQ(spin_us_for(o, {.local_agents = 8, .cores = 8}), 0.0);
}

TEST(RunSettings, FromTheOptionsWithDelaysStretched) {
  ReplayOptions o;
  o.delay_us = 1.5;
  o.iterations = 7;
  o.no_tx_timestamps = true;
  o.connect_timeout_s = 2;
  const RunSettings s = make_run_settings(mlp(), o, {.scale = TimeScale(2)});
  EXPECT_EQ(s.iterations, 7U);
  EXPECT_FALSE(s.open_loop);
  EXPECT_EQ(s.spin, 20 * kMicro);
  EXPECT_EQ(s.delay, 3000) << "a time-scaled replay stretches the emulated delay";
  EXPECT_FALSE(s.tx_timestamps);
  EXPECT_EQ(s.connect_timeout, 2 * kSecond);
  EXPECT_EQ(s.idle_timeout, 60 * kSecond);
  EXPECT_EQ(s.read_nap, 200 * kMicro) << "on by default, and not stretched: it is about this host's reads";
  const ExecutorOptions e = executor_options_for(s, 1.5);
  EXPECT_EQ(e.iterations, 7U);
  EXPECT_EQ(e.slowdown, 1.5);
}

TEST(RunSettings, ANapIsFromZeroToAMillisecond) {
  ReplayOptions o;
  o.read_nap_us = 0;
  EXPECT_EQ(make_run_settings(mlp(), o, {}).read_nap, 0);
  o.read_nap_us = 1000;
  EXPECT_EQ(make_run_settings(mlp(), o, {}).read_nap, kMostReadNap);
  for (const double bad : {-1.0, 1000.5, std::nan("")}) {
    o.read_nap_us = bad;
    try {
      make_run_settings(mlp(), o, {});
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), "--read-nap-us must be from 0 to 1000");
    }
  }
}

TEST(RunSettings, OpenLoopIsPlannedOnALinkAsMuchSlowerAsTheReplay) {
  const Profile p = mlp();
  ReplayOptions o;
  o.open_loop = true;
  o.link_gbps = 10;
  const RunSettings s = make_run_settings(p, o, {.scale = TimeScale(4)});
  const OpenLoopPlan plan = open_loop_plan(p, 2.5e9);
  EXPECT_TRUE(s.open_loop);
  EXPECT_EQ(s.open_loop_offsets, plan.offsets);
  EXPECT_EQ(s.open_loop_period, plan.period);
  EXPECT_GT(s.open_loop_period, 0);
}

TEST(RunSettings, RejectsOptionsOutOfRangeNamingThem) {
  const Profile p = mlp();
  const auto message = [&](ReplayOptions o) {
    try {
      make_run_settings(p, o, {});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ReplayOptions o;
  o.delay_us = -1;
  EXPECT_EQ(message(o), "--delay-us must be zero or more");
  o = {};
  o.slowdown = 0;
  EXPECT_EQ(message(o), "--slowdown must be from 0 to 1000");
  o = {};
  o.idle_timeout_s = 0;
  EXPECT_EQ(message(o), "--idle-timeout must be from 0 to 86400 seconds");
  o = {};
  o.congestion_control = "c u b i c";
  EXPECT_EQ(message(o), "--congestion-control 'c u b i c': a congestion control's name is letters, digits, '_' and '-'");
  o.congestion_control = "cubic";
  EXPECT_EQ(make_run_settings(p, o, {}).congestion_control, "cubic");
  o = {};
  o.realtime = true;
  o.sched_batch = true;
  EXPECT_EQ(message(o), "--realtime and --sched-batch exclude each other");
  o.realtime = false;
  EXPECT_TRUE(make_run_settings(p, o, {}).sched_batch);
  EXPECT_THROW(seconds_option(86401, "--timeout"), std::invalid_argument);
  EXPECT_EQ(seconds_option(0.5, "--timeout"), 500 * kMilli);
}

TEST(RunSettings, AgentArgumentsCarryTheOptions) {
  ReplayOptions o;
  o.open_loop = true;
  o.delay_us = 2.5;
  o.iterations = 3;
  EXPECT_EQ(agent_arguments(o, {.local_agents = 4, .cores = 2}),
            (std::vector<std::string>{"--spin-us", "0", "--link-gbps", "10", "--connect-timeout", "30", "--idle-timeout", "60",
                                      "--open-loop", "--delay-us", "2.5", "--iterations", "3"}));
  // The read gap is on by default: turned off, the agents are told so.
  o.read_gap_us = 0;
  const auto args = agent_arguments(o, {.local_agents = 4, .cores = 2});
  const auto gap = std::find(args.begin(), args.end(), "--read-gap-us");
  ASSERT_NE(gap, args.end());
  EXPECT_EQ(*std::next(gap), "0");
  // So are the naps, told only when they differ from the default.
  EXPECT_EQ(std::count(args.begin(), args.end(), "--read-nap-us"), 0);
  o.read_nap_us = 0;
  const auto no_naps = agent_arguments(o, {.local_agents = 4, .cores = 2});
  const auto nap = std::find(no_naps.begin(), no_naps.end(), "--read-nap-us");
  ASSERT_NE(nap, no_naps.end());
  EXPECT_EQ(*std::next(nap), "0");
  o.congestion_control = "reno";
  const auto with_cc = agent_arguments(o, {.local_agents = 4, .cores = 2});
  const auto cc = std::find(with_cc.begin(), with_cc.end(), "--congestion-control");
  ASSERT_NE(cc, with_cc.end());
  EXPECT_EQ(*std::next(cc), "reno");
  EXPECT_EQ(std::count(with_cc.begin(), with_cc.end(), "--sched-batch"), 0);
  o.sched_batch = true;
  const auto batch = agent_arguments(o, {.local_agents = 4, .cores = 2});
  EXPECT_EQ(std::count(batch.begin(), batch.end(), "--sched-batch"), 1);
}

TEST(RunSettings, HeartbeatStretchesWithTheAgentsPerCoreOfThisMachine) {
  EXPECT_EQ(heartbeat_for({.local_agents = 0, .cores = 2}), kHeartbeatTimeout);  // agents elsewhere
  EXPECT_EQ(heartbeat_for({.local_agents = 32, .cores = 2}), kHeartbeatTimeout);
  EXPECT_EQ(heartbeat_for({.local_agents = 33, .cores = 2}), 2 * kHeartbeatTimeout);
  EXPECT_EQ(heartbeat_for({.local_agents = 256, .cores = 2}), 8 * kHeartbeatTimeout);
  EXPECT_EQ(heartbeat_for({.local_agents = 256, .cores = 64}), kHeartbeatTimeout);
  EXPECT_EQ(heartbeat_for({.local_agents = 20, .cores = 0}), 2 * kHeartbeatTimeout);  // cores unknown: one
}

TEST(RunSettings, CrowdedMachinesWaitLongerForAgentsAndTheirFlows) {
  const RunPlacement alone{.local_agents = 4, .cores = 2};
  const RunPlacement crowded{.local_agents = 256, .cores = 2};  // 4 testbed hosts of 64 ranks each
  EXPECT_EQ(crowding_factor(alone), 1U);
  EXPECT_EQ(crowding_factor(crowded), 8U);
  EXPECT_EQ(launched_agent_arguments(alone), std::vector<std::string>{"--quiet"});
  // The agents run starts are told the stretched heartbeat, in seconds.
  EXPECT_EQ(launched_agent_arguments(crowded), (std::vector<std::string>{"--quiet", "--heartbeat", "14.4"}));
  const Profile p = mlp();
  ReplayOptions o;
  o.connect_timeout_s = 30;
  EXPECT_EQ(make_run_settings(p, o, alone).connect_timeout, 30 * kSecond);
  EXPECT_EQ(make_run_settings(p, o, crowded).connect_timeout, 8 * 30 * kSecond);
}

TEST(TimeScale, StretchesAndScalesBack) {
  EXPECT_THROW(TimeScale(0), std::invalid_argument);
  EXPECT_THROW(TimeScale(1001), std::invalid_argument);
  const TimeScale k(2.5);
  EXPECT_EQ(k.stretch(1000.0), 2500);
  EXPECT_EQ(k.scale_back(2500), 1000);
  const Profile p = mlp();
  EXPECT_EQ(TimeScale().stretch(p).ops.size(), p.ops.size());
}

}  // namespace
}  // namespace tw

// The testbed's plan: rates, pair specs, and the ip/tc commands it runs.
#include <gtest/gtest.h>

#include <algorithm>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/launch/hosts.hpp"
#include "tensorwire/launch/testbed.hpp"

namespace tw {
namespace {

std::string line(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

bool has(const std::vector<std::vector<std::string>>& cmds, const std::string& text) {
  return std::any_of(cmds.begin(), cmds.end(), [&](const auto& c) { return line(c) == text; });
}

TEST(TestbedPlan, Rates) {
  EXPECT_EQ(parse_rate("10gbit"), 10'000'000'000u);
  EXPECT_EQ(parse_rate("300mbit"), 300'000'000u);
  EXPECT_EQ(parse_rate("1.5Gbit"), 1'500'000'000u);
  EXPECT_EQ(parse_rate("64kbit"), 64'000u);
  EXPECT_FALSE(parse_rate("fast"));
  EXPECT_FALSE(parse_rate("10gb"));
  EXPECT_FALSE(parse_rate("0mbit"));
  EXPECT_FALSE(parse_rate("1bit"));  // below 8 kbit/s
  EXPECT_EQ(format_rate(300'000'000), "300mbit");
  EXPECT_EQ(format_rate(1'500'000'000), "1500mbit");
}

TEST(TestbedPlan, Pairs) {
  const PairShape p = parse_pair("1-3:rate=300mbit,delay=5ms", 4);
  EXPECT_EQ(p.a, 1u);
  EXPECT_EQ(p.b, 3u);
  EXPECT_EQ(p.rate, 300'000'000u);
  EXPECT_EQ(p.delay, 5 * kMilli);
  const auto error = [](const std::string& spec) {
    try {
      parse_pair(spec, 4);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error("1-4:rate=1mbit"), "--pair '1-4:rate=1mbit': the testbed has hosts 0 to 3 (expected like 1-3:rate=300mbit,delay=5ms)");
  EXPECT_NE(error("2-2:rate=1mbit").find("two different hosts"), std::string::npos);
  EXPECT_NE(error("1-3").find("no HOST-HOST:"), std::string::npos);
  EXPECT_NE(error("1-3:speed=1mbit").find("unknown key 'speed'"), std::string::npos);
  EXPECT_NE(error("1-3:delay=-1ms").find("delay '-1ms'"), std::string::npos);
  EXPECT_THROW(check_testbed_name("much-too-long"), std::invalid_argument);
  EXPECT_NO_THROW(check_testbed_name("tw-2"));
}

TEST(TestbedPlan, UpCommandsNameEverythingAfterTheTestbed) {
  TestbedSpec s;
  s.name = "tb";
  s.hosts = 2;
  const auto cmds = testbed_up_commands(s);
  EXPECT_TRUE(has(cmds, "ip link add tb-br type bridge"));
  EXPECT_TRUE(has(cmds, "ip netns add tb-h1"));
  EXPECT_TRUE(has(cmds, "ip link add tb-v1 type veth peer name eth0 netns tb-h1"));
  EXPECT_TRUE(has(cmds, "ip -n tb-h1 addr add " + s.address(1) + "/24 dev eth0"));
  EXPECT_EQ(s.address(1).rfind("10.213.", 0), 0u);
  TestbedSpec other = s;
  other.name = "tc";
  EXPECT_NE(other.subnet_prefix(), s.subnet_prefix());
}

TEST(TestbedPlan, ShapingWithHostRateAndAPair) {
  TestbedSpec s;
  s.name = "tb";
  s.hosts = 3;
  s.rate = 1'000'000'000;
  s.pairs = {parse_pair("0-2:rate=300mbit,delay=2ms", 3)};
  const auto cmds = testbed_shaping_commands(s);
  // Earlier shaping is removed first (allowed to fail), then rebuilt.
  EXPECT_TRUE(has(cmds, "- tc -n tb-h0 qdisc del dev eth0 root"));
  EXPECT_TRUE(has(cmds, "tc qdisc add dev tb-v1 root tbf rate 1gbit burst 500000 latency 100ms"));
  EXPECT_TRUE(has(cmds, "tc -n tb-h0 class add dev eth0 parent 1: classid 1:102 htb rate 300mbit ceil 300mbit burst 150000 cburst 150000"));
  EXPECT_TRUE(has(cmds, "tc -n tb-h2 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst " + s.address(0) +
                            "/32 flowid 1:100"));
  EXPECT_EQ(s.delay(2, 0), 2 * kMilli);
  EXPECT_EQ(s.delay(0, 1), 0);
  // Host 1 has no pair: only its rate.
  EXPECT_FALSE(has(cmds, "tc -n tb-h1 class add dev eth0 parent 1: classid 1:100 htb rate 300mbit ceil 300mbit burst 150000 cburst 150000"));
  // Nothing to shape: no qdisc at all.
  TestbedSpec plain;
  plain.name = "tb";
  plain.hosts = 2;
  for (const auto& c : testbed_shaping_commands(plain)) EXPECT_EQ(c[0], "-") << line(c);
  // The spec survives its state file.
  const TestbedSpec back = testbed_spec_from_json(testbed_spec_json(s));
  EXPECT_EQ(back.hosts, 3u);
  EXPECT_EQ(back.pairs.size(), 1u);
  EXPECT_EQ(back.pairs[0].delay, 2 * kMilli);
}

TEST(TestbedPlan, PlacementAndHostLists) {
  const auto hosts = parse_host_list("u@a:2,b,c:3");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].target, "u@a");
  EXPECT_EQ(hosts[0].host, "a");
  EXPECT_EQ(hosts[2].slots, 3u);
  EXPECT_EQ(place_ranks(hosts, 5), (std::vector<std::size_t>{0, 0, 1, 2, 2}));
  EXPECT_THROW(place_ranks(hosts, 7), std::invalid_argument);
  EXPECT_THROW(parse_host_list("a,,b"), std::invalid_argument);
  EXPECT_THROW(parse_host_list("a:0"), std::invalid_argument);
  EXPECT_THROW(parse_host_list("-oProxyCommand=x"), std::invalid_argument);
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
}

TEST(TimeScale, StretchesDurationsAndGapsOnly) {
  Profile p;
  Op c;
  c.type = OpType::compute;
  c.duration = 1000;
  c.gap = 10;
  Op s;
  s.type = OpType::send;
  s.bytes = 4096;
  s.gap = 3;
  p.ops = {c, s};
  const Profile q = time_scaled(p, 2.5);
  EXPECT_EQ(q.ops[0].duration, 2500);
  EXPECT_EQ(q.ops[0].gap, 25);
  EXPECT_EQ(q.ops[1].gap, 8);  // 7.5 rounded
  EXPECT_EQ(q.ops[1].bytes, 4096u);
}

}  // namespace
}  // namespace tw

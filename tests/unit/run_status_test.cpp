// The controller's pure decisions: which agent gets which rank, and what the
// API and the progress line report.
#include <gtest/gtest.h>

#include "tensorwire/controller/progress_line.hpp"
#include "tensorwire/controller/rank_assignment.hpp"
#include "tensorwire/controller/run_status.hpp"

namespace tw {
namespace {

using Hints = std::vector<std::optional<RankId>>;
using Ranks = std::vector<std::optional<RankId>>;

TEST(RankAssignment, HintsFirstThenOrderOfArrival) {
  EXPECT_EQ(assign_ranks(Hints{std::nullopt, 0, std::nullopt}, 3), (Ranks{1, 0, 2}));
  EXPECT_EQ(assign_ranks(Hints{2, 1, 0}, 3), (Ranks{2, 1, 0}));
}

TEST(RankAssignment, DuplicateAndOutOfRangeHintsCountAsNone) {
  EXPECT_EQ(assign_ranks(Hints{1, 1, 7}, 3), (Ranks{1, 0, 2}));
}

TEST(RankAssignment, AgentsBeyondTheRanksGetNone) {
  EXPECT_EQ(assign_ranks(Hints{std::nullopt, std::nullopt, 0}, 2), (Ranks{1, std::nullopt, 0}));
  EXPECT_EQ(assign_ranks(Hints{}, 2), Ranks{});
}

TEST(RunStatus, BriefAndFullStatus) {
  RunProgress p(2, 4);
  p.iteration(0, 0, 100, 200);
  p.iteration(1, 0, 110, 250);
  RunStatus s;
  s.id = "r1";
  s.state = RunState::running;
  s.profile = "ring";
  s.ranks = 2;
  AgentStatus a;
  a.rank = 1;
  a.host = "h";
  a.error = "broke";
  s.agents.push_back(a);
  const auto brief = run_brief_json(s, p);
  EXPECT_EQ(brief["state"], "running");
  EXPECT_EQ(brief["iterations"], 4);
  EXPECT_EQ(brief["iterations_done"], 1);
  const auto full = run_status_json(s, p);
  EXPECT_EQ(full["last_iteration_ns"], 150);
  EXPECT_EQ(full["agents"][0]["rank"], 1);
  EXPECT_EQ(full["agents"][0]["iterations_done"], 1);
  EXPECT_EQ(full["agents"][0]["error"], "broke");
  EXPECT_FALSE(full.contains("error"));
  s.error = "rank 1 (h): broke";
  EXPECT_EQ(run_status_json(s, p)["error"], "rank 1 (h): broke");
  EXPECT_EQ(feed_progress_json(p, {}, {})["type"], "progress");
  // What the dashboard draws: the iterations done so far, numbered, and each
  // flow's bytes by its ranks.
  const auto feed = feed_progress_json(p, {{"f0", 0, 1}, {"f1", 1, 0}}, {5, 6});
  EXPECT_EQ(feed["recent_iteration_ns"], nlohmann::json::parse("[[0, 150]]"));
  EXPECT_EQ(feed["flow_bytes"], nlohmann::json::parse("[[0, 1, 5], [1, 0, 6]]"));
}

TEST(RunStatus, MetricsNameEveryFlow) {
  RunProgress p(2, 20);
  const std::string m = metrics_text("r", {{"f0", 0, 1}, {"f1", 1, 0}}, {5, 6}, p, 2, {});
  EXPECT_NE(m.find("tensorwire_iterations_planned{run=\"r\"} 20\n"), std::string::npos);
  EXPECT_NE(m.find("tensorwire_iterations_completed_total{run=\"r\"} 0\n"), std::string::npos);
  EXPECT_NE(m.find("tensorwire_rank_iterations_completed_total{run=\"r\",rank=\"1\"} 0\n"), std::string::npos);
  EXPECT_NE(m.find("tensorwire_flow_bytes_sent_total{run=\"r\",flow=\"f1\",src=\"1\",dst=\"0\"} 6\n"), std::string::npos);
  EXPECT_NE(m.find("tensorwire_agents_connected{run=\"r\"} 2\n"), std::string::npos);
  EXPECT_EQ(m.find("tensorwire_iteration_seconds{"), std::string::npos);  // none completed yet
  EXPECT_EQ(m.find("tensorwire_rank_iteration_seconds{"), std::string::npos);
  // Rank 1 finished its first iteration (250 ms): its own series, not yet the job's.
  ASSERT_TRUE(p.iteration(1, 0, 1000, 1000 + 250 * kMilli));
  const std::string later = metrics_text("r", {{"f0", 0, 1}, {"f1", 1, 0}}, {5, 6}, p, 2, {});
  EXPECT_NE(later.find("tensorwire_rank_iterations_completed_total{run=\"r\",rank=\"1\"} 1\n"), std::string::npos) << later;
  EXPECT_NE(later.find("tensorwire_rank_iteration_seconds{run=\"r\",rank=\"1\"} 0.250000000\n"), std::string::npos) << later;
  EXPECT_EQ(later.find("tensorwire_rank_iteration_seconds{run=\"r\",rank=\"0\"}"), std::string::npos) << later;
  EXPECT_EQ(later.find("tensorwire_iteration_seconds{"), std::string::npos) << later;
}

TEST(RunStatus, MetricsGiveEachAgentsClockAndQuoteLabels) {
  RunProgress p(2, 4);
  std::vector<AgentStatus> agents(3);
  agents[0].rank = 1;
  agents[0].host = "h\"1\\";
  agents[0].clock.add(10, {-2500, 1800, 40000, 8});
  agents[0].clock.add(20, {-2600, 1200, 30000, 8});  // the latest counts
  agents[1].rank = 0;
  agents[1].host = "h0";  // no estimate yet: no series
  agents[2].host = "late";  // no rank yet
  agents[2].clock.add(10, {1, 1, 1, 1});
  const std::string m = metrics_text("r\n", {{"a\"b", 0, 1}}, {7}, p, 3, agents);
  EXPECT_NE(m.find("tensorwire_clock_offset_seconds{run=\"r\\n\",rank=\"1\",host=\"h\\\"1\\\\\"} -0.000002600\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tensorwire_clock_bound_seconds{run=\"r\\n\",rank=\"1\",host=\"h\\\"1\\\\\"} 0.000001200\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("rank=\"0\",host"), std::string::npos) << m;
  EXPECT_EQ(m.find("host=\"late\""), std::string::npos) << m;
  EXPECT_NE(m.find("flow=\"a\\\"b\""), std::string::npos) << m;
}

TEST(ProgressLine, Bar) {
  EXPECT_EQ(progress_bar(0, 10, std::nullopt, 0), "[" + std::string(30, ' ') + "] 0/10 iterations");
  EXPECT_EQ(progress_bar(5, 10, std::nullopt, 0).substr(0, 17), "[=============== ");
  EXPECT_NE(progress_bar(10, 10, 12 * kMilli, 8e9).find("10/10 iterations  "), std::string::npos);
}

}  // namespace
}  // namespace tw

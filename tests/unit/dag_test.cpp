#include "tensorwire/core/dag.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

using Preds = std::vector<std::vector<OpIndex>>;

TEST(Dag, TopologicalOrderRespectsEveryEdge) {
  const Preds preds = {{}, {0}, {0}, {1, 2}, {3}};
  const auto order = topological_order(preds);
  ASSERT_EQ(order.size(), 5U);
  std::vector<std::size_t> at(5);
  for (std::size_t i = 0; i < order.size(); ++i) at[order[i]] = i;
  for (std::size_t v = 0; v < preds.size(); ++v) {
    for (OpIndex u : preds[v]) EXPECT_LT(at[u], at[v]);
  }
}

TEST(Dag, NoOrderWithACycle) {
  EXPECT_TRUE(topological_order(Preds{{1}, {0}}).empty());
  EXPECT_TRUE(find_cycles(Preds{{}, {0}, {1}}).empty());
}

TEST(Dag, FindsEachCycleOnceInExecutionOrder) {
  // 0 -> 1 -> 2 -> 0 (2 waits for 1, 1 for 0, 0 for 2), a separate self loop on 4,
  // and 3 hanging off the cycle.
  const Preds preds = {{2}, {0}, {1}, {2}, {4}};
  const auto cycles = find_cycles(preds);
  ASSERT_EQ(cycles.size(), 2U);
  EXPECT_EQ(cycles[0], (std::vector<OpIndex>{0, 1, 2, 0}));
  EXPECT_EQ(cycles[1], (std::vector<OpIndex>{4, 4}));
}

TEST(Dag, ReportsAShortestCycleInsideALargeComponent) {
  // A ring of 6 with a chord: the shortest cycle through 0 uses the chord.
  Preds preds(6);
  for (OpIndex v = 0; v < 6; ++v) preds[(v + 1) % 6].push_back(v);  // v -> v+1
  preds[0].push_back(3);  // 3 -> 0
  const auto cycles = find_cycles(preds);
  ASSERT_EQ(cycles.size(), 1U);
  EXPECT_EQ(cycles[0], (std::vector<OpIndex>{0, 1, 2, 3, 0}));
}

TEST(Dag, HandlesLongChainsWithoutRecursion) {
  const std::size_t n = 1'000'000;
  Preds preds(n);
  for (std::size_t v = 1; v < n; ++v) preds[v].push_back(static_cast<OpIndex>(v - 1));
  EXPECT_TRUE(find_cycles(preds).empty());
  preds[0].push_back(static_cast<OpIndex>(n - 1));
  const auto cycles = find_cycles(preds);
  ASSERT_EQ(cycles.size(), 1U);
  EXPECT_EQ(cycles[0].size(), n + 1);
}

}  // namespace
}  // namespace tw

// Whether a receiving flow may look again at a dry socket: the running count of
// /proc/loadavg against the machine's cores, read at most once a period.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "spare_cores.hpp"

namespace tw {
namespace {

TEST(LoadavgRunning, TakesTheCountBeforeTheSlashOfTheFourthField) {
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 2/345 12345\n"), 2);
  EXPECT_EQ(loadavg_running("12.00 9.50 8.25 130/2048 99"), 130);
  EXPECT_EQ(loadavg_running("0.00 0.00 0.00 0/1 1"), 0);
}

TEST(LoadavgRunning, RefusesWhatIsNotALoadavgLine) {
  EXPECT_EQ(loadavg_running(""), std::nullopt);
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99"), std::nullopt) << "no fourth field";
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 2 345"), std::nullopt) << "no slash";
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 /345 1"), std::nullopt) << "no count";
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 x2/345 1"), std::nullopt);
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 2x/345 1"), std::nullopt);
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 -2/345 1"), std::nullopt);
  EXPECT_EQ(loadavg_running("0.13 0.66 0.99 99999999999999999999/345 1"), std::nullopt) << "out of range";
}

// A reader whose answer the test sets, counting how often it is asked.
struct FakeRunning {
  std::optional<int>* value;
  int* asked;
  std::optional<int> operator()() {
    ++*asked;
    return *value;
  }
};

TEST(SpareCores, ACoreIsSpareWhileTheRunnableThreadsFitTheCores) {
  std::optional<int> running = 2;
  int asked = 0;
  SpareCores<FakeRunning> cores(2, FakeRunning{&running, &asked}, 1000);
  EXPECT_TRUE(cores.spare(0)) << "two running on two cores, the reader one of them";
  running = 3;
  EXPECT_FALSE(cores.spare(1000)) << "a third waits";
  running = 1;
  EXPECT_TRUE(cores.spare(2000));
}

TEST(SpareCores, TheCountIsReadAtMostOncePerPeriod) {
  std::optional<int> running = 5;
  int asked = 0;
  SpareCores<FakeRunning> cores(2, FakeRunning{&running, &asked}, 1000);
  EXPECT_FALSE(cores.spare(10'000));
  running = 1;
  EXPECT_FALSE(cores.spare(10'500)) << "held until the period has passed";
  EXPECT_FALSE(cores.spare(10'999));
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(cores.spare(11'000));
  EXPECT_EQ(asked, 2);
}

TEST(SpareCores, ACountThatCannotBeReadLeavesTheLookAsItWas) {
  std::optional<int> running = std::nullopt;
  int asked = 0;
  SpareCores<FakeRunning> cores(2, FakeRunning{&running, &asked}, 1000);
  EXPECT_TRUE(cores.spare(0));
  SpareCores<FakeRunning> unknown_cores(-1, FakeRunning{&running, &asked}, 1000);
  running = 64;
  EXPECT_TRUE(unknown_cores.spare(0)) << "sysconf failed: the cores are unknown";
}

// The real /proc/loadavg: its running count includes the reading thread, and
// grows while other threads spin.
TEST(LoadavgReader, CountsTheThreadsRunningNow) {
  LoadavgReader read;
  const std::optional<int> alone = read();
  ASSERT_TRUE(alone.has_value()) << "/proc/loadavg unreadable";
  if (*alone == 0) GTEST_SKIP() << "a /proc/loadavg that counts no running thread (a sandbox's own)";
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<std::thread> spinners;
  const unsigned n = std::clamp(std::thread::hardware_concurrency(), 2U, 8U);
  for (unsigned i = 0; i < n; ++i) {
    spinners.emplace_back([&] {
      started.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  while (started.load() < static_cast<int>(n)) std::this_thread::yield();
  int most = 0;
  for (int k = 0; k < 200 && most <= static_cast<int>(n); ++k) {
    most = std::max(most, read().value_or(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  for (auto& t : spinners) t.join();
  EXPECT_GE(most, static_cast<int>(n)) << n << " spinning threads";
  LoadavgReader moved(std::move(read));
  EXPECT_TRUE(moved().has_value());
  EXPECT_FALSE(read().has_value()) << "a moved-from reader has no file";
}

}  // namespace
}  // namespace tw

#include "tensorwire/core/units.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

TEST(Units, ParsesDurations) {
  EXPECT_EQ(parse_duration("0"), 0);
  EXPECT_EQ(parse_duration("17ns"), 17);
  EXPECT_EQ(parse_duration("250us"), 250'000);
  EXPECT_EQ(parse_duration("1.5ms"), 1'500'000);
  EXPECT_EQ(parse_duration("2s"), 2'000'000'000);
  EXPECT_EQ(parse_duration("0.0000005s"), 500);
  EXPECT_EQ(parse_duration("1.0004us"), 1000);  // rounds to the nearest ns
  EXPECT_EQ(parse_duration("-3ms"), -3'000'000);
  for (const char* bad : {"", "ms", "1", "1 ms", "1.2.3ms", "1h", "abc", ".ms", "1e3ms", "99999999999999999999s"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

TEST(Units, ParsesSizes) {
  EXPECT_EQ(parse_bytes("1048576"), 1048576U);
  EXPECT_EQ(parse_bytes("4KiB"), 4096U);
  EXPECT_EQ(parse_bytes("1.5MB"), 1'500'000U);
  EXPECT_EQ(parse_bytes("25MiB"), 25 * kMiB);
  EXPECT_EQ(parse_bytes("2GiB"), 2 * kGiB);
  for (const char* bad : {"", "-1", "1.5", "0.3B", "1.1KiB", "12 MB", "1mb", "x"}) {
    EXPECT_FALSE(parse_bytes(bad).has_value()) << bad;
  }
}

TEST(Units, FormatsDurationsExactly) {
  for (Nanos v : {Nanos{1}, Nanos{999}, Nanos{1000}, Nanos{1'500'000}, Nanos{1'234'567}, Nanos{3'000'000'000},
                  Nanos{3'000'000'001}, Nanos{-42'000}}) {
    const std::string s = format_duration(v);
    EXPECT_EQ(parse_duration(s), v) << s;
  }
  EXPECT_EQ(format_duration(1'500'000), "1.5ms");
  EXPECT_EQ(format_duration(250'000), "250us");
  EXPECT_EQ(format_duration(0), "0");
}

TEST(Units, FormatsForPeople) {
  EXPECT_EQ(human_bytes(25 * kMiB), "25.00 MiB");
  EXPECT_EQ(human_duration(1'500'000), "1.50 ms");
  EXPECT_EQ(human_rate(10e9), "10.00 Gb/s");
}

TEST(Units, NearestRankPercentiles) {
  const std::vector<Nanos> v = {50, 10, 40, 20, 30};
  EXPECT_EQ(percentile(v, 0.5), 30);
  EXPECT_EQ(percentile(v, 0.0), 10);
  EXPECT_EQ(percentile(v, 0.2), 10);
  EXPECT_EQ(percentile(v, 0.21), 20);
  EXPECT_EQ(percentile(v, 0.99), 50);
  EXPECT_EQ(percentile(v, 1.0), 50);
  EXPECT_EQ(percentile({}, 0.5), 0);
}

}  // namespace
}  // namespace tw

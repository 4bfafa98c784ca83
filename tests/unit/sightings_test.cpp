// The arrival times a receiving flow gives the messages it read after waiting
// out --read-gap-us, from what it saw in its socket meanwhile: no socket, no clock.
#include <gtest/gtest.h>

#include "sightings.hpp"

namespace tw {
namespace {

constexpr Nanos kRead = 1000;  // the time of the read that returned the bytes

TEST(Sightings, WithoutASightingABytesTimeIsItsRead) {
  const Sightings s;
  EXPECT_EQ(s.arrived(1, kRead), kRead);
}

TEST(Sightings, AMessageTakesTheFirstSightingThatReachedItsEnd) {
  Sightings s;
  ASSERT_TRUE(s.note(10, 24));    // a header, whole
  ASSERT_TRUE(s.note(20, 4120));  // its 4 KiB payload
  ASSERT_TRUE(s.note(30, 4200));  // part of the next header and payload
  EXPECT_EQ(s.arrived(24, kRead), 10) << "a header ending exactly where a sighting did";
  EXPECT_EQ(s.arrived(25, kRead), 20);
  EXPECT_EQ(s.arrived(4120, kRead), 20);
  EXPECT_EQ(s.arrived(4121, kRead), 30);
  EXPECT_EQ(s.arrived(4201, kRead), kRead) << "arrived after the last sighting: the read's time";
}

TEST(Sightings, ASightingThatReachesNoFurtherIsNotKept) {
  Sightings s;
  ASSERT_TRUE(s.note(10, 100));
  ASSERT_TRUE(s.note(20, 100));
  ASSERT_TRUE(s.note(30, 50));
  EXPECT_EQ(s.size(), 1U);
  EXPECT_EQ(s.arrived(100, kRead), 10);
}

TEST(Sightings, AReadDropsWhatItCoveredAndKeepsTheRest) {
  Sightings s;
  ASSERT_TRUE(s.note(10, 100));
  ASSERT_TRUE(s.note(20, 200));
  ASSERT_TRUE(s.note(30, 300));
  s.consumed(200);  // a read that stopped short of what was seen
  EXPECT_EQ(s.size(), 1U);
  EXPECT_EQ(s.arrived(250, kRead), 30);
  s.consumed(300);
  EXPECT_EQ(s.size(), 0U);
  EXPECT_EQ(s.arrived(301, kRead), kRead);
}

TEST(Sightings, FullMeansReadNowAndAReadOfAllMakesRoom) {
  Sightings s;
  for (std::uint64_t i = 1; i <= Sightings::kMost; ++i) ASSERT_TRUE(s.note(static_cast<Nanos>(i), i * 10));
  EXPECT_FALSE(s.note(100, Sightings::kMost * 10 + 10)) << "full";
  EXPECT_TRUE(s.note(100, Sightings::kMost * 10)) << "no further: nothing to keep";
  EXPECT_EQ(s.arrived(21, kRead), 3);
  s.consumed(20);  // a read that stopped short: still full
  EXPECT_FALSE(s.note(200, Sightings::kMost * 10 + 10));
  s.consumed(Sightings::kMost * 10);  // a read of all that was seen
  EXPECT_EQ(s.size(), 0U);
  EXPECT_TRUE(s.note(200, Sightings::kMost * 10 + 10));
  EXPECT_EQ(s.arrived(Sightings::kMost * 10 + 10, kRead), 200);
}

}  // namespace
}  // namespace tw

#include "tensorwire/analysis/rates.hpp"

#include <gtest/gtest.h>

namespace tw {
namespace {

Record received(std::uint32_t flow, Bytes bytes, Nanos first, Nanos last) {
  ReceiveRecord r;
  r.flow = flow;
  r.bytes = bytes;
  r.recv_first = first;
  r.recv_last = last;
  r.delivered = last;
  return r;
}

TEST(ReceiveRates, GoodputPerFlowAndPerReceivingRank) {
  Profile p;
  p.ranks.resize(3);
  p.flows = {{"a", 0, 2}, {"b", 1, 2}, {"c", 2, 0}};
  SendRecord sent;  // not a receipt: not counted
  sent.flow = 0;
  sent.bytes = 999;
  sent.ready = 0;
  sent.sent_app = 1;
  const std::vector<std::vector<Record>> ranks = {
      {},
      {sent},
      // Flow a: 1000 bytes from t=1 s to t=2 s; flow b: 3000 bytes from 1.5 s to 3 s.
      {received(0, 600, kSecond, kSecond + 100), received(0, 400, 2 * kSecond - 100, 2 * kSecond),
       received(1, 3000, kSecond + kSecond / 2, 3 * kSecond)}};
  const ReceiveRates r = receive_rates(p, ranks);
  EXPECT_EQ(r.flows[0].messages, 2U);
  EXPECT_EQ(r.flows[0].bytes, 1000U);
  EXPECT_DOUBLE_EQ(r.flows[0].bits_per_second(), 8000.0);
  EXPECT_DOUBLE_EQ(r.flows[0].messages_per_second(), 2.0);
  EXPECT_DOUBLE_EQ(r.flows[1].bits_per_second(), 3000 * 8 / 1.5);
  EXPECT_EQ(r.flows[2].messages, 0U);
  EXPECT_EQ(r.flows[2].bits_per_second(), 0.0) << "nothing received: no rate, not a division by zero";
  // Rank 2 received both: 4000 bytes from 1 s to 3 s.
  EXPECT_EQ(r.ranks[2].bytes, 4000U);
  EXPECT_EQ(r.ranks[2].first, kSecond);
  EXPECT_EQ(r.ranks[2].last, 3 * kSecond);
  EXPECT_DOUBLE_EQ(r.ranks[2].bits_per_second(), 16000.0);
  EXPECT_EQ(r.ranks[1].messages, 0U);
}

}  // namespace
}  // namespace tw

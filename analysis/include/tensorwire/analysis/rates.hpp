// Goodput at the receivers of a replay: per flow and per receiving rank, the bytes
// delivered between the first byte of the first message and the last byte of the
// last one (receive records: recv_first, recv_last).
#pragma once

#include <vector>

#include "tensorwire/core/records.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

struct ReceiveRate {
  std::uint64_t messages = 0;
  Bytes bytes = 0;
  Nanos first = -1, last = -1;  // first recv_first, last recv_last
  double bits_per_second() const;
  double messages_per_second() const;
};

struct ReceiveRates {
  std::vector<ReceiveRate> flows;  // [flow]
  std::vector<ReceiveRate> ranks;  // [receiving rank]: all its flows together
};

// ranks[r]: the records of rank r (one clock). Header-only messages count.
ReceiveRates receive_rates(const Profile& profile, const std::vector<std::vector<Record>>& ranks);

}  // namespace tw

#include "tensorwire/analysis/rates.hpp"

#include <algorithm>

namespace tw {

namespace {

double per_second(double amount, Nanos first, Nanos last) {
  return last > first ? amount * 1e9 / static_cast<double>(last - first) : 0;
}

void add(ReceiveRate& r, const ReceiveRecord& x) {
  ++r.messages;
  r.bytes += x.bytes;
  if (x.recv_first >= 0) r.first = r.first < 0 ? x.recv_first : std::min(r.first, x.recv_first);
  if (x.recv_last >= 0) r.last = std::max(r.last, x.recv_last);
}

}  // namespace

double ReceiveRate::bits_per_second() const { return per_second(static_cast<double>(bytes) * 8, first, last); }

double ReceiveRate::messages_per_second() const { return per_second(static_cast<double>(messages), first, last); }

ReceiveRates receive_rates(const Profile& p, const std::vector<std::vector<Record>>& ranks) {
  ReceiveRates out;
  out.flows.resize(p.flows.size());
  out.ranks.resize(p.ranks.size());
  for (std::size_t r = 0; r < ranks.size() && r < out.ranks.size(); ++r) {
    for (const Record& rec : ranks[r]) {
      if (!rec.is(RecordKind::receive)) continue;
      const auto x = rec.as<ReceiveRecord>();
      if (x.flow >= out.flows.size()) continue;
      add(out.flows[x.flow], x);
      add(out.ranks[r], x);
    }
  }
  return out;
}

}  // namespace tw

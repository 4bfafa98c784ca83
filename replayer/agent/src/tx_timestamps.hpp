// SO_TIMESTAMPING on TCP sockets: the kernel reports, for the last byte of each
// send call, when it entered the queueing discipline (TX_SCHED), when it was
// handed to the device (TX_SOFTWARE) and when the peer acknowledged it (TX_ACK).
// Reports arrive on the socket's error queue, keyed by the byte's offset in the
// stream counted from when timestamping was enabled (OPT_ID), without payload
// (OPT_TSONLY). Kept apart because <linux/...> headers clash with glibc's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tw {

struct TxStamp {
  enum class Type : std::uint8_t { sched, software, ack };
  Type type = Type::software;
  std::uint32_t key = 0;  // stream offset of the byte, modulo 2^32
  std::int64_t realtime_ns = 0;
};

// Enables the reports on a connected TCP socket; false (and *error) on failure.
bool enable_tx_timestamps(int fd, std::string* error);

// Reads pending reports without blocking, at most `max`; returns how many.
std::size_t drain_tx_timestamps(int fd, TxStamp* out, std::size_t max);

}  // namespace tw

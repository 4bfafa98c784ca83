// SO_TIMESTAMPING on TCP sockets: the kernel reports, for the last byte of a
// send call that asks for it, when it entered the queueing discipline
// (TX_SCHED), when it was handed to the device (TX_SOFTWARE) and when the peer
// acknowledged it (TX_ACK). Reports arrive on the socket's error queue, keyed by
// the byte's offset in the stream counted from when timestamping was enabled
// (OPT_ID), without payload (OPT_TSONLY). A send call asks with a control message
// (per message: only the calls that write a message's first or last bytes), or
// the socket asks for every call (per write: kernels that refuse the control
// message). Kept apart because <linux/...> headers clash with glibc's.
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

// Enables the reports on a connected TCP socket: for the send calls that carry
// tx_stamp_control(), or with `every_write` for every send call. `sched` adds
// TX_SCHED (worth it only where a queueing discipline can hold packets).
// False (and *error) on failure.
bool enable_tx_timestamps(int fd, bool every_write, bool sched, std::string* error);

// Space for the control message that asks for one send call's timestamps.
inline constexpr std::size_t kTxStampControlSize = 32;  // >= CMSG_SPACE(sizeof(__u32))
// Writes that control message into `buf` (kTxStampControlSize bytes, aligned for
// cmsghdr); returns its length, for msghdr::msg_controllen.
std::size_t tx_stamp_control(void* buf, bool sched);

// Reads pending reports without blocking, at most `max`; returns how many.
std::size_t drain_tx_timestamps(int fd, TxStamp* out, std::size_t max);

}  // namespace tw

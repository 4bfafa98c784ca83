// Socket copies at matching alignment.
//
// The kernel copies every byte a socket sends or receives between user memory and
// its own pages (_copy_from_iter, _copy_to_iter). On this project's AMD EPYC
// machines that copy cost 3.5 to 4 times more per byte when source and destination
// were misaligned against each other by 8 or 24 bytes (perf, one flow between two
// testbed hosts): which is what a payload behind the 24-byte frame header was, and
// it made the sending core, which also runs the bridge's receive work, the limit.
//
// A thread's sends fill the kernel's per-thread page fragment in order, so the
// next byte a thread sends lands at the count of bytes its sends took so far,
// modulo the page size: a sender takes its payload view at that offset modulo
// kCopyAlign (CopyCursor counts per I/O thread). A reader lands each read at the
// flow's stream position modulo kCopyAlign, which on one host (loopback, veth) is
// where the sender's pages put it when the sending thread has that one flow. The
// content of the buffers is not looked at.
//
// Both are estimates that cost nothing when wrong but the misaligned copy: the
// kernel restarts a fragment at offset 0 when its page is no longer referenced
// (after a pause in which everything sent was acknowledged and read), Asio's own
// handshake writes are not counted, and across a NIC the receiving pages follow
// the driver's layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tw {

inline constexpr std::size_t kCopyAlign = 64;
// What a buffer needs beyond its longest view: up to kCopyAlign - 1 to align its
// start, and the view's offset, up to kCopyAlign - 1.
inline constexpr std::size_t kCopySlack = 2 * kCopyAlign;

// Bytes handed to sendmsg by the flows of one I/O thread; that thread only (a
// cache line of its own).
struct alignas(64) CopyCursor {
  std::uint64_t sent = 0;
};

// The start of a view of `buffer` (kCopySlack longer than the view, so more than
// kCopySlack bytes) whose address is `pos` modulo kCopyAlign.
template <typename Byte>
Byte* aligned_view(std::span<Byte> buffer, std::uint64_t pos) {
  const auto at = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::uintptr_t skip = (kCopyAlign - at % kCopyAlign) % kCopyAlign;
  return buffer.data() + skip + pos % kCopyAlign;
}

// The longest view aligned_view may give of a buffer of `size` bytes, which must
// be more than kCopySlack.
inline std::size_t aligned_view_size(std::size_t size) { return size - kCopySlack; }

}  // namespace tw

// The baseline of the small-message benchmark: the simplest possible sender (a
// blocking write loop of fixed-size messages) and receiver (a blocking read loop),
// over the same link as the agents. Prints messages per second at the receiver.
//   blocking_pair recv PORT SIZE COUNT [LOWAT]
//   blocking_pair send HOST PORT SIZE COUNT [CHUNK]
//   blocking_pair send-stamped HOST PORT SIZE COUNT
//   blocking_pair send-paced HOST PORT SIZE COUNT GAP_US SPIN_US
// send-stamped asks the kernel for the same transmit timestamps as the agents
// (queued, on the wire, acknowledged) and reads them back after every write, so
// the kernel's cost of measuring is paid on both sides of the comparison.
// CHUNK: the sender writes at most that many bytes a call, as the agents do
// (128 KiB), rather than each message in one call.
// LOWAT: the receiver sets SO_RCVLOWAT to that many bytes, as the agents do (one
// wake-up per LOWAT bytes rather than per few segments).
// send-paced is the baseline of the start-precision benchmark: each message is due
// GAP_US after the previous write returned; the loop sleeps (clock_nanosleep) until
// SPIN_US before that, spins on the clock to it, and writes. It prints the start
// error (due to the clock read before the write) in microseconds: p50 p99 max.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "copy_alignment.hpp"
#include "tx_timestamps.hpp"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: blocking_pair recv PORT SIZE COUNT [LOWAT] | send HOST PORT SIZE COUNT [CHUNK] | send-stamped HOST PORT SIZE COUNT | send-paced HOST PORT SIZE COUNT GAP_US SPIN_US\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "recv") {
    const int port = std::atoi(argv[2]);
    const std::size_t size = std::strtoull(argv[3], nullptr, 10);
    const std::size_t count = std::strtoull(argv[4], nullptr, 10);
    const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 1) != 0) return 1;
    const int fd = ::accept(ls, nullptr, nullptr);
    if (argc > 5) {
      const int lowat = std::atoi(argv[5]);
      if (lowat <= 0 || ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) != 0) return 1;
    }
    // Each read lands at the stream's position modulo the alignment, as the
    // agents' reads do (copy_alignment.hpp).
    std::vector<char> buf(256 * 1024 + tw::kCopySlack);
    const std::size_t total = size * count;
    std::size_t got = 0;
    auto start = std::chrono::steady_clock::now();
    bool first = true;
    while (got < total) {
      const ssize_t n = ::read(fd, tw::aligned_view(std::span<char>(buf), got), tw::aligned_view_size(buf.size()));
      if (n <= 0) return 1;
      if (first) {
        start = std::chrono::steady_clock::now();
        first = false;
      }
      got += static_cast<std::size_t>(n);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%.0f\n", static_cast<double>(count) / s);
    return 0;
  }
  const bool paced = mode == "send-paced";
  if (argc < (paced ? 8 : 6) || (mode != "send" && mode != "send-stamped" && !paced)) {
    std::fprintf(stderr, "usage: blocking_pair send HOST PORT SIZE COUNT [CHUNK] | send-stamped HOST PORT SIZE COUNT | send-paced HOST PORT SIZE COUNT GAP_US SPIN_US\n");
    return 2;
  }
  const std::string host = argv[2];
  const int port = std::atoi(argv[3]);
  const std::size_t size = std::strtoull(argv[4], nullptr, 10);
  const std::size_t count = std::strtoull(argv[5], nullptr, 10);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  for (int i = 0; ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0; ++i) {
    if (i > 100) return 1;
    ::usleep(20000);
  }
  const bool stamped = mode == "send-stamped";
  std::string why;
  // As the agents stamp a message here (no queueing discipline on the path):
  // on the wire and acknowledged, for each write, which is one message.
  if (stamped && !tw::enable_tx_timestamps(fd, true, false, &why)) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  std::vector<tw::TxStamp> stamps(256);
  std::size_t reports = 0;
  // The message starts on a cache line, as the kernel's copy of it will when the
  // sender is alone on its thread (copy_alignment.hpp: misaligned copies cost
  // several times more here).
  std::vector<char> store(size + tw::kCopySlack, 'x');
  char* const msg = tw::aligned_view(std::span<char>(store), 0);
  const auto mono = [] {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  };
  const std::size_t chunk = mode == "send" && argc > 6 ? std::strtoull(argv[6], nullptr, 10) : size;
  if (chunk == 0) return 2;
  std::vector<double> late;  // us
  late.reserve(paced ? count : 0);
  // Without this, a normal-priority sleeper's timer may fire up to 50 us late
  // (the default timer slack); the agents' timerfd has none.
  if (paced) ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::int64_t due = 0;
  const std::int64_t gap = paced ? std::atoll(argv[6]) * 1000 : 0, spin = paced ? std::atoll(argv[7]) * 1000 : 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (paced && i > 0) {
      const std::int64_t wake = due - spin;
      const timespec ts{static_cast<time_t>(wake / 1'000'000'000), static_cast<long>(wake % 1'000'000'000)};
      while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
      std::int64_t now = mono();
      while (now < due) now = mono();
      late.push_back(static_cast<double>(now - due) / 1e3);
    }
    std::size_t off = 0;
    while (off < size) {
      const ssize_t n = ::write(fd, msg + off, std::min(size - off, chunk));
      if (n <= 0) return 1;
      off += static_cast<std::size_t>(n);
    }
    if (stamped) reports += tw::drain_tx_timestamps(fd, stamps.data(), stamps.size());
    if (paced) due = mono() + gap;
  }
  if (paced && !late.empty()) {
    std::sort(late.begin(), late.end());
    std::printf("%.1f %.1f %.1f\n", late[late.size() / 2], late[late.size() * 99 / 100], late.back());
  }
  if (stamped) {
    // The last acknowledgements arrive after the last write: give them a moment.
    ::usleep(100000);
    reports += tw::drain_tx_timestamps(fd, stamps.data(), stamps.size());
    std::fprintf(stderr, "transmit timestamp reports: %zu (2 per message expected: %zu)\n", reports, 2 * count);
  }
  ::close(fd);
  return 0;
}

// The capture shim's cost per call: run once plainly and once with
// LD_PRELOAD=libtensorwire_capture.so TW_CAPTURE_DIR=...; prints nanoseconds per
// call for (1) 1-byte send() on a loopback TCP connection (traced), and
// (2) write() to /dev/null (not a socket: the shim's fast path).
//   shim_cost CALLS
// The sends go in batches of kBatch, timed, with nothing waiting to read; each
// batch is read back between them, untimed. A reader blocked in recv() meanwhile
// would be woken by every packet and take the core from the sender or not, as
// the scheduler chose: with one, the plain sends took twice as long as the traced
// ones (7.1 against 3.8 us, 2026-12-07), the reader's wake-ups and not the shim.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 200000;
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 1) != 0) return 1;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&sa), &len);
  const int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return 1;
  const int a = ::accept(ls, nullptr, nullptr);
  const int one = 1;
  ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Each batch fits in the sockets' buffers whole (the receiver's queue
  // coalesces the 1-byte segments), so no send waits for the reader.
  constexpr long kBatch = 1000;
  const char x = 'x';
  std::chrono::steady_clock::duration sending{};
  char buf[kBatch];
  for (long done = 0; done < calls;) {
    const long batch = std::min(kBatch, calls - done);
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < batch; ++i) {
      if (::send(c, &x, 1, 0) != 1) return 1;
    }
    sending += std::chrono::steady_clock::now() - t0;
    for (long got = 0; got < batch;) {
      const ssize_t n = ::recv(a, buf, static_cast<std::size_t>(batch - got), 0);
      if (n <= 0) return 1;
      got += n;
    }
    done += batch;
  }
  const int null = ::open("/dev/null", O_WRONLY);
  const auto t2 = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) {
    if (::write(null, &x, 1) != 1) return 1;
  }
  const auto t3 = std::chrono::steady_clock::now();
  std::printf("%.0f %.0f\n", std::chrono::duration<double, std::nano>(sending).count() / static_cast<double>(calls),
              std::chrono::duration<double, std::nano>(t3 - t2).count() / static_cast<double>(calls));
  return 0;
}

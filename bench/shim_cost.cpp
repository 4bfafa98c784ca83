// The capture shim's cost per call: run once plainly and once with
// LD_PRELOAD=libtensorwire_capture.so TW_CAPTURE_DIR=...; prints nanoseconds per
// call for (1) 1-byte send() on a loopback TCP connection (traced), and
// (2) write() to /dev/null (not a socket: the shim's fast path).
//   shim_cost CALLS
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

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
  std::thread drain([a, calls] {
    char buf[65536];
    long got = 0;
    while (got < calls) {
      const ssize_t n = ::recv(a, buf, sizeof buf, 0);
      if (n <= 0) return;
      got += n;
    }
  });
  const char x = 'x';
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) {
    if (::send(c, &x, 1, 0) != 1) return 1;
  }
  const auto t1 = std::chrono::steady_clock::now();
  drain.join();
  const int null = ::open("/dev/null", O_WRONLY);
  const auto t2 = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) {
    if (::write(null, &x, 1) != 1) return 1;
  }
  const auto t3 = std::chrono::steady_clock::now();
  std::printf("%.0f %.0f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(calls),
              std::chrono::duration<double, std::nano>(t3 - t2).count() / static_cast<double>(calls));
  return 0;
}

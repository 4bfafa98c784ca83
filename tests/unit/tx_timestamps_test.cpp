// Which SO_TIMESTAMPING reports the kernel makes for a message's writes, on a
// real loopback connection.
#include "tx_timestamps.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/util/unique_fd.hpp"

namespace tw {
namespace {

// A message of three writes asks on its first and last: the kernel reports each
// of those leaving the host and acknowledged, keyed by the offset of its last
// byte, and nothing for the write between.
TEST(TxTimestamps, AMessageAsksOnItsFirstAndLastWritesOnly) {
  const UniqueFd listener(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  const UniqueFd out(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(::connect(out.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const UniqueFd in(::accept(listener.get(), nullptr, nullptr));
  ASSERT_GE(in.get(), 0);
  const int one = 1;
  ::setsockopt(out.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string why;
  if (!enable_tx_timestamps(out.get(), false, false, &why)) GTEST_SKIP() << why;

  std::vector<char> data(1000, 'x');
  for (int w = 0; w < 3; ++w) {  // the message's first, middle and last writes
    iovec iov{data.data(), data.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[kTxStampControlSize];
    if (w != 1) {
      msg.msg_control = control;
      msg.msg_controllen = tx_stamp_control(control, false);
    }
    // MSG_EOR: each write its own segment, so that no later write's bytes join a
    // stamped one's and move its report's key.
    const ssize_t n = ::sendmsg(out.get(), &msg, MSG_EOR);
    if (n < 0 && errno == EINVAL) GTEST_SKIP() << "this kernel takes no timestamping control message (the agent falls back)";
    ASSERT_EQ(n, 1000);
  }
  std::vector<char> got(4096);
  std::size_t received = 0;
  while (received < 3000) {
    const ssize_t n = ::recv(in.get(), got.data(), got.size(), 0);
    ASSERT_GT(n, 0);
    received += static_cast<std::size_t>(n);
  }

  std::vector<std::pair<TxStamp::Type, std::uint32_t>> reports;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (reports.size() < 4 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out.get(), 0, 0};
    ::poll(&p, 1, 50);  // the error queue signals POLLERR
    TxStamp s[8];
    const std::size_t n = drain_tx_timestamps(out.get(), s, 8);
    for (std::size_t i = 0; i < n; ++i) reports.emplace_back(s[i].type, s[i].key);
  }
  ::poll(nullptr, 0, 100);  // anything more would come within this
  TxStamp s[8];
  const std::size_t late = drain_tx_timestamps(out.get(), s, 8);
  for (std::size_t i = 0; i < late; ++i) reports.emplace_back(s[i].type, s[i].key);
  std::sort(reports.begin(), reports.end());
  const std::vector<std::pair<TxStamp::Type, std::uint32_t>> want = {
      {TxStamp::Type::software, 999}, {TxStamp::Type::software, 2999}, {TxStamp::Type::ack, 999}, {TxStamp::Type::ack, 2999}};
  EXPECT_EQ(reports, want);
}

}  // namespace
}  // namespace tw

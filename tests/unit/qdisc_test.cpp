// Which queueing discipline a flow's packets meet on their way out: the root
// qdisc's kind, parsed from an RTM_GETQDISC dump built by hand; and for a real
// socket on loopback (noqueue), that nothing can hold its packets.
#include "qdisc.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace tw {
namespace {

// One RTM_NEWQDISC message: interface, parent handle, kind.
void add_qdisc(std::vector<char>& dump, int ifindex, std::uint32_t parent, const std::string& kind) {
  const std::size_t at = dump.size();
  const std::size_t attr = RTA_LENGTH(kind.size() + 1);
  const std::size_t len = NLMSG_LENGTH(NLMSG_ALIGN(sizeof(tcmsg))) + RTA_ALIGN(attr);
  dump.resize(at + NLMSG_ALIGN(len), 0);
  nlmsghdr h{};
  h.nlmsg_len = static_cast<std::uint32_t>(len);
  h.nlmsg_type = RTM_NEWQDISC;
  std::memcpy(dump.data() + at, &h, sizeof h);
  tcmsg t{};
  t.tcm_ifindex = ifindex;
  t.tcm_parent = parent;
  std::memcpy(dump.data() + at + NLMSG_HDRLEN, &t, sizeof t);
  rtattr r{};
  r.rta_len = static_cast<unsigned short>(attr);
  r.rta_type = TCA_KIND;
  char* a = dump.data() + at + NLMSG_LENGTH(NLMSG_ALIGN(sizeof(tcmsg)));
  std::memcpy(a, &r, sizeof r);
  std::memcpy(a + RTA_LENGTH(0), kind.c_str(), kind.size() + 1);
}

TEST(Qdisc, TheRootQdiscOfTheInterfaceIsFound) {
  std::vector<char> dump;
  add_qdisc(dump, 1, TC_H_ROOT, "noqueue");
  add_qdisc(dump, 2, 0x10001, "pfifo");  // a child, not the root
  add_qdisc(dump, 2, TC_H_ROOT, "tbf");
  EXPECT_EQ(root_qdisc_kind(dump.data(), dump.size(), 1), "noqueue");
  EXPECT_EQ(root_qdisc_kind(dump.data(), dump.size(), 2), "tbf");
  EXPECT_FALSE(root_qdisc_kind(dump.data(), dump.size(), 3));
  // Cut anywhere, the dump is read no further than its bytes.
  for (std::size_t n = 0; n < dump.size(); ++n) (void)root_qdisc_kind(dump.data(), n, 2);
  // A length field that points past the end stops the parse.
  nlmsghdr h;
  std::memcpy(&h, dump.data(), sizeof h);
  h.nlmsg_len = 1 << 30;
  std::memcpy(dump.data(), &h, sizeof h);
  EXPECT_FALSE(root_qdisc_kind(dump.data(), dump.size(), 2));
}

TEST(Qdisc, LoopbackCannotQueue) {
  const int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l, 1), 0);
  socklen_t n = sizeof a;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &n);
  const int c = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_FALSE(egress_can_queue(c));
  ::close(c);
  ::close(l);
}

}  // namespace
}  // namespace tw

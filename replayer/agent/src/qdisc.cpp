#include "qdisc.hpp"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "tensorwire/util/unique_fd.hpp"

namespace tw {

std::optional<std::string> root_qdisc_kind(const void* dump, std::size_t len, int ifindex) {
  const auto* p = static_cast<const char*>(dump);
  for (std::size_t at = 0; at + sizeof(nlmsghdr) <= len;) {
    nlmsghdr h;
    std::memcpy(&h, p + at, sizeof h);
    if (h.nlmsg_len < sizeof h || h.nlmsg_len > len - at) break;
    if (h.nlmsg_type == RTM_NEWQDISC && h.nlmsg_len >= NLMSG_LENGTH(sizeof(tcmsg))) {
      tcmsg t;
      std::memcpy(&t, p + at + NLMSG_HDRLEN, sizeof t);
      if (t.tcm_ifindex == ifindex && t.tcm_parent == TC_H_ROOT) {
        for (std::size_t a = at + NLMSG_LENGTH(NLMSG_ALIGN(sizeof(tcmsg))); a + sizeof(rtattr) <= at + h.nlmsg_len;) {
          rtattr r;
          std::memcpy(&r, p + a, sizeof r);
          if (r.rta_len < sizeof r || r.rta_len > at + h.nlmsg_len - a) break;
          if (r.rta_type == TCA_KIND) {
            const char* s = p + a + RTA_LENGTH(0);
            return std::string(s, strnlen(s, r.rta_len - RTA_LENGTH(0)));
          }
          a += RTA_ALIGN(r.rta_len);
        }
      }
    }
    at += NLMSG_ALIGN(h.nlmsg_len);
  }
  return std::nullopt;
}

namespace {

// The index of the interface that holds the socket's local address; 0 if none.
int local_interface(int fd) {
  sockaddr_storage local{};
  socklen_t n = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0) return 0;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return 0;
  int index = 0;
  for (const ifaddrs* i = all; i != nullptr && index == 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != local.ss_family) continue;
    bool same = false;
    if (local.ss_family == AF_INET) {
      same = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
             reinterpret_cast<const sockaddr_in*>(&local)->sin_addr.s_addr;
    } else if (local.ss_family == AF_INET6) {
      same = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                         &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr, sizeof(in6_addr)) == 0;
    }
    if (same) index = static_cast<int>(::if_nametoindex(i->ifa_name));
  }
  ::freeifaddrs(all);
  return index;
}

}  // namespace

bool egress_can_queue(int fd) {
  const int ifindex = local_interface(fd);
  if (ifindex <= 0) return false;
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!nl) return false;
  timeval tv{1, 0};  // the kernel answers at once; never wait longer
  ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    nlmsghdr h;
    tcmsg t;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.h.nlmsg_type = RTM_GETQDISC;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = 1;
  req.t.tcm_family = AF_UNSPEC;
  if (::send(nl.get(), &req, req.h.nlmsg_len, 0) < 0) return false;
  std::array<char, 32768> buf;
  // The dump comes in several datagrams; at most 64 of them (a host with
  // thousands of qdiscs answers "cannot tell").
  for (int round = 0; round < 64; ++round) {
    const ssize_t got = ::recv(nl.get(), buf.data(), buf.size(), 0);
    if (got <= 0) return false;
    if (const auto kind = root_qdisc_kind(buf.data(), static_cast<std::size_t>(got), ifindex)) return *kind != "noqueue";
    nlmsghdr last;
    bool done = false;
    for (std::size_t at = 0; at + sizeof last <= static_cast<std::size_t>(got);) {
      std::memcpy(&last, buf.data() + at, sizeof last);
      if (last.nlmsg_type == NLMSG_DONE || last.nlmsg_type == NLMSG_ERROR) done = true;
      if (last.nlmsg_len < sizeof last) break;
      at += NLMSG_ALIGN(last.nlmsg_len);
    }
    if (done) return false;
  }
  return false;
}

}  // namespace tw

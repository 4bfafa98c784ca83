#include "tx_timestamps.hpp"

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace tw {

bool enable_tx_timestamps(int fd, std::string* error) {
  const unsigned int flags = SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_TX_ACK |
                             SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
  if (::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0) {
    if (error) *error = std::string("SO_TIMESTAMPING: ") + std::strerror(errno);
    return false;
  }
  return true;
}

std::size_t drain_tx_timestamps(int fd, TxStamp* out, std::size_t max) {
  std::size_t n = 0;
  while (n < max) {
    alignas(cmsghdr) char control[512];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;  // EAGAIN: drained
    const scm_timestamping* ts = nullptr;
    const sock_extended_err* ee = nullptr;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
        ts = reinterpret_cast<const scm_timestamping*>(CMSG_DATA(c));
      } else if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                 (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
        ee = reinterpret_cast<const sock_extended_err*>(CMSG_DATA(c));
      }
    }
    if (ts == nullptr || ee == nullptr || ee->ee_errno != ENOMSG || ee->ee_origin != SO_EE_ORIGIN_TIMESTAMPING) continue;
    TxStamp& s = out[n];
    switch (ee->ee_info) {
      case SCM_TSTAMP_SCHED: s.type = TxStamp::Type::sched; break;
      case SCM_TSTAMP_SND: s.type = TxStamp::Type::software; break;
      case SCM_TSTAMP_ACK: s.type = TxStamp::Type::ack; break;
      default: continue;
    }
    s.key = ee->ee_data;
    s.realtime_ns = static_cast<std::int64_t>(ts->ts[0].tv_sec) * 1'000'000'000 + ts->ts[0].tv_nsec;
    ++n;
  }
  return n;
}

}  // namespace tw

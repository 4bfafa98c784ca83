#include "tx_timestamps.hpp"

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tw {

namespace {

unsigned int generation_flags(bool sched) {
  unsigned int f = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_TX_ACK;
  if (sched) f |= SOF_TIMESTAMPING_TX_SCHED;
  return f;
}

}  // namespace

bool enable_tx_timestamps(int fd, bool every_write, bool sched, std::string* error) {
  unsigned int flags = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
  if (every_write) flags |= generation_flags(sched);
  if (::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0) {
    if (error) *error = std::string("SO_TIMESTAMPING: ") + std::strerror(errno);
    return false;
  }
  return true;
}

std::size_t tx_stamp_control(void* buf, bool sched) {
  static_assert(CMSG_SPACE(sizeof(std::uint32_t)) <= kTxStampControlSize);
  std::memset(buf, 0, kTxStampControlSize);
  auto* c = static_cast<cmsghdr*>(buf);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SO_TIMESTAMPING;
  c->cmsg_len = CMSG_LEN(sizeof(std::uint32_t));
  const std::uint32_t flags = generation_flags(sched);
  std::memcpy(CMSG_DATA(c), &flags, sizeof flags);
  return CMSG_SPACE(sizeof(std::uint32_t));
}

std::size_t drain_tx_timestamps(int fd, TxStamp* out, std::size_t max) {
  // Up to kBatch reports per system call: a busy flow produces two to four per
  // message (six with TX_SCHED).
  constexpr std::size_t kBatch = 64;
  constexpr std::size_t kControl = 256;
  alignas(cmsghdr) static thread_local char control[kBatch][kControl];
  static thread_local mmsghdr msgs[kBatch];
  std::size_t n = 0;
  while (n < max) {
    const std::size_t want = std::min(kBatch, max - n);
    for (std::size_t i = 0; i < want; ++i) {
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_control = control[i];
      msgs[i].msg_hdr.msg_controllen = kControl;
    }
    const int got = ::recvmmsg(fd, msgs, static_cast<unsigned>(want), MSG_ERRQUEUE | MSG_DONTWAIT, nullptr);
    if (got <= 0) break;  // EAGAIN: drained
    for (int m = 0; m < got; ++m) {
      msghdr& msg = msgs[m].msg_hdr;
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
    if (static_cast<std::size_t>(got) < want) break;  // the queue is empty now
  }
  return n;
}

}  // namespace tw

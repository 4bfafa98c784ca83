#include "tcp_info.hpp"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace tw {

std::optional<TcpInfo> read_tcp_info(int fd) {
  struct tcp_info info;
  std::memset(&info, 0, sizeof info);
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  TcpInfo out;
  out.rtt_us = info.tcpi_rtt;
  out.rttvar_us = info.tcpi_rttvar;
  out.snd_cwnd = info.tcpi_snd_cwnd;
  out.total_retrans = info.tcpi_total_retrans;
  out.unacked = info.tcpi_unacked;
  // Older kernels return a shorter struct: only read what they filled in.
  const auto has = [len](std::size_t end) { return len >= end; };
  if (has(offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked)) out.bytes_acked = info.tcpi_bytes_acked;
  if (has(offsetof(struct tcp_info, tcpi_notsent_bytes) + sizeof info.tcpi_notsent_bytes)) out.notsent_bytes = info.tcpi_notsent_bytes;
  if (has(offsetof(struct tcp_info, tcpi_sndbuf_limited) + sizeof info.tcpi_sndbuf_limited)) {
    out.busy_us = info.tcpi_busy_time;
    out.rwnd_limited_us = info.tcpi_rwnd_limited;
    out.sndbuf_limited_us = info.tcpi_sndbuf_limited;
  }
  return out;
}

}  // namespace tw

// TCP_INFO of a connected socket, with the fields glibc's struct lacks (busy,
// receive-window-limited and send-buffer-limited time). Kept apart because
// <linux/tcp.h> and <netinet/tcp.h> cannot be included together.
#pragma once

#include <cstdint>
#include <optional>

namespace tw {

struct TcpInfo {
  std::uint32_t rtt_us = 0;
  std::uint32_t rttvar_us = 0;
  std::uint32_t snd_cwnd = 0;  // segments
  std::uint32_t total_retrans = 0;
  std::uint32_t notsent_bytes = 0;
  std::uint32_t unacked = 0;  // segments
  std::uint64_t busy_us = 0;
  std::uint64_t rwnd_limited_us = 0;
  std::uint64_t sndbuf_limited_us = 0;
  std::uint64_t bytes_acked = 0;  // since the connection opened
};

std::optional<TcpInfo> read_tcp_info(int fd);

}  // namespace tw

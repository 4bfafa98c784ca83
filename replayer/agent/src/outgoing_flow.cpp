#include "outgoing_flow.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <chrono>
#include <limits>
#include <system_error>

#include "clock.hpp"
#include "tcp_info.hpp"

namespace tw {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

OutgoingFlow::OutgoingFlow(asio::io_context& ctx, const Profile& p, FlowIndex flow, RankId rank, std::span<const std::byte> payload,
                           Recorder& recorder, Events& events, Nanos realtime_offset, bool prioritised)
    : p_(p),
      flow_(flow),
      rank_(rank),
      payload_(payload),
      recorder_(recorder),
      events_(events),
      realtime_offset_(realtime_offset),
      sock_(ctx),
      credit_(prioritised),
      credit_timer_(ctx) {}

std::string OutgoingFlow::attach(tcp::socket sock, std::string peer, bool tx_timestamps) {
  sock_ = std::move(sock);
  peer_ = std::move(peer);
  connected_ = true;
  std::string why;
  if (tx_timestamps) {
    if (enable_tx_timestamps(sock_.native_handle(), &why)) {
      stamps_.emplace(rank_, flow_, kRing);
    }
  }
  return why;
}

void OutgoingFlow::send(const Action& a) {
  const Bytes wire = frame::wire_bytes(p_.ops[a.op].bytes);
  frame::encode_header({a.iteration, a.op, wire}, header_);
  action_ = a;
  remaining_ = wire - frame::kHeaderSize;
  if (stamps_) {
    if (auto given_up = stamps_->track(a.op, a.iteration, wire)) recorder_.push(*given_up);
  }
  ready_ = mono_now();
  write_next(true);
}

void OutgoingFlow::sent_when_credit() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(sock_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
    events_.write_failed(*this, std::system_category().message(err));  // a reset leaves its unsent bytes counted
    return;
  }
  int unsent = 0;
  if (ioctl(sock_.native_handle(), SIOCOUTQNSD, &unsent) != 0 || static_cast<Bytes>(unsent) < kPriorityCredit) {
    events_.sent(*this, action_, mono_now());
    return;
  }
  // The kernel signals no edge when its unsent bytes drop below a level, so
  // look again shortly: 100 us is 12 KB at 1 Gbit/s. While nothing drains (a
  // peer that stopped reading) look less often, up to every 2 ms; the agent's
  // idle timeout ends a run that stalls.
  credit_poll_us_ = unsent < credit_unsent_ ? 100 : std::min(2 * credit_poll_us_, 2000);
  credit_unsent_ = unsent;
  credit_timer_.expires_after(std::chrono::microseconds(credit_poll_us_));
  credit_timer_.async_wait([this](const error_code& ec) {
    if (ec || !sock_.is_open()) return;
    sent_when_credit();
  });
}

// Writes the header (first call of a message) and up to 64 views of the payload
// buffer. The buffer is small enough to stay in cache and is repeated across the
// iovecs, so large messages go out in few system calls.
void OutgoingFlow::write_next(bool with_header) {
  std::size_t n = 0;
  if (with_header) {
    // The first write is short, so that its transmit timestamp marks the
    // message's first bytes leaving (wire_first).
    iov_[n++] = asio::buffer(header_);
    const std::size_t len = static_cast<std::size_t>(std::min<Bytes>({remaining_, static_cast<Bytes>(payload_.size()), kFirstWrite}));
    if (len > 0) iov_[n++] = asio::buffer(payload_.data(), len);
    remaining_ -= len;
  } else {
    while (n < iov_.size() && remaining_ > 0) {
      const std::size_t len = static_cast<std::size_t>(std::min<Bytes>(remaining_, static_cast<Bytes>(payload_.size())));
      iov_[n++] = asio::buffer(payload_.data(), len);
      remaining_ -= len;
    }
  }
  // Asio's default completion condition caps every write at 64 KiB (1000 system
  // calls per 64 MiB message); let each write take as much as the kernel will.
  asio::async_write(
      sock_, std::span<const asio::const_buffer>(iov_.data(), n),
      [](const error_code& ec, std::size_t) -> std::size_t { return ec ? 0 : std::numeric_limits<std::size_t>::max(); },
      [this](const error_code& ec, std::size_t) { written(ec); });
}

void OutgoingFlow::written(const error_code& ec) {
  if (ec) {
    events_.write_failed(*this, ec.message());
    return;
  }
  events_.progress();
  if (remaining_ > 0) {
    write_next(false);
    return;
  }
  const Nanos now = mono_now();
  const Op& op = p_.ops[action_.op];
  SendRecord r;
  r.flags = op.bytes < frame::kHeaderSize ? kFlagHeaderOnly : 0;
  r.rank = static_cast<std::uint16_t>(rank_);
  r.op = action_.op;
  r.iteration = action_.iteration;
  r.flow = flow_;
  r.bytes = frame::wire_bytes(op.bytes);
  r.planned = action_.at + realtime_offset_;
  r.ready = ready_ + realtime_offset_;
  r.sent_app = now + realtime_offset_;
  recorder_.push(r);
  ++messages_;
  bytes_ += r.bytes;
  if (credit_) {
    credit_poll_us_ = 100;
    credit_unsent_ = std::numeric_limits<int>::max();
    sent_when_credit();
    return;
  }
  events_.sent(*this, action_, now);
}

void OutgoingFlow::watch_stamps() {
  if (!stamps_) return;
  sock_.async_wait(tcp::socket::wait_error, [this](const error_code& ec) {
    if (ec) return;
    drain_stamps();
    watch_stamps();
  });
}

void OutgoingFlow::drain_stamps() {
  std::size_t n;
  do {
    n = drain_tx_timestamps(sock_.native_handle(), stamp_buffer_.data(), stamp_buffer_.size());
    for (std::size_t i = 0; i < n; ++i) stamps_->apply(stamp_buffer_[i]);
    while (auto r = stamps_->pop()) recorder_.push(*r);
  } while (n == stamp_buffer_.size());
}

void OutgoingFlow::record_tcp_info(Nanos now) {
  const auto info = read_tcp_info(sock_.native_handle());
  if (!info) return;
  TcpInfoRecord t;
  t.rank = static_cast<std::uint16_t>(rank_);
  t.snd_cwnd = info->snd_cwnd;
  t.total_retrans = info->total_retrans;
  t.flow = flow_;
  t.sndbuf_limited_ns = static_cast<Nanos>(info->sndbuf_limited_us) * 1000;
  t.at = now;
  t.rtt_ns = static_cast<Nanos>(info->rtt_us) * 1000;
  t.rttvar_ns = static_cast<Nanos>(info->rttvar_us) * 1000;
  t.busy_ns = static_cast<Nanos>(info->busy_us) * 1000;
  t.rwnd_limited_ns = static_cast<Nanos>(info->rwnd_limited_us) * 1000;
  recorder_.push(t);
}

void OutgoingFlow::shutdown_send() {
  error_code ignored;
  sock_.shutdown(tcp::socket::shutdown_send, ignored);
}

void OutgoingFlow::finish() {
  connected_ = false;
  sock_.async_wait(tcp::socket::wait_read, [this](const error_code&) {
    // The FIN acknowledges all we sent: the last ACK reports are queued now;
    // what never came is lost.
    if (stamps_) {
      drain_stamps();
      while (auto r = stamps_->pop(true)) recorder_.push(*r);
    }
    close();
    events_.closed(*this);
  });
}

void OutgoingFlow::close() {
  error_code ignored;
  credit_timer_.cancel();
  sock_.close(ignored);
}

}  // namespace tw

#include "outgoing_flow.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "clock.hpp"
#include "tcp_info.hpp"

namespace tw {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

OutgoingFlow::OutgoingFlow(asio::io_context& ctx, const Profile& p, const IndexMap& ops, FlowIndex flow, RankId rank,
                           std::span<const std::byte> payload, CopyCursor& cursor, Recorder::Producer& recorder, Events& events,
                           Nanos realtime_offset, bool prioritised)
    : p_(p),
      ops_(ops),
      flow_(flow),
      rank_(rank),
      payload_(payload),
      view_max_(payload.size() > kCopySlack ? static_cast<Bytes>(aligned_view_size(payload.size())) : 0),
      cursor_(cursor),
      recorder_(recorder),
      events_(events),
      realtime_offset_(realtime_offset),
      sock_(ctx),
      credit_(prioritised),
      credit_timer_(ctx) {
  if (payload.size() <= kCopySlack) {
    throw std::invalid_argument("OutgoingFlow: a payload buffer of " + std::to_string(payload.size()) + " bytes");
  }
}

std::string OutgoingFlow::attach(tcp::socket sock, std::string peer, const TxStampPolicy& stamps) {
  sock_ = std::move(sock);
  peer_ = std::move(peer);
  connected_ = true;
  error_code ec;
  sock_.non_blocking(true, ec);  // sendmsg with MSG_DONTWAIT below; the flag for Asio's own operations
  fd_ = sock_.native_handle();
  std::string why;
  if (stamps.on && enable_tx_timestamps(fd_, false, stamps.sched, &why)) {
    stamps_.emplace(rank_, flow_, kRing, stamps.sched);
    stamp_sched_ = stamps.sched;
    stamp_every_ = std::max<std::uint32_t>(1, stamps.every);
  }
  return why;
}

std::optional<Nanos> OutgoingFlow::send(const Action& a) {
  const Bytes wire = frame::wire_bytes(p_.ops[a.op].bytes);
  frame::encode_header({a.iteration, ops_.to_global(a.op), wire}, header_);
  action_ = a;
  header_left_ = frame::kHeaderSize;
  payload_left_ = wire - frame::kHeaderSize;
  first_write_ = true;
  stamp_this_ = false;
  if (stamps_) {
    stamp_this_ = stamp_count_++ % stamp_every_ == 0;
    if (auto given_up = stamps_->track(a.op, a.iteration, wire, stamp_this_)) recorder_.push(*given_up);
  }
  ready_ = mono_now();
  if (write_some() && message_written()) return sent_at_;
  return std::nullopt;
}

// One sendmsg per round: the header's rest and a view of the payload buffer
// (small enough to stay in cache, reused, aligned as the kernel's copy of it will
// be: copy_alignment.hpp), at most kMaxWrite bytes: a long
// call holds the socket while the peer's ACKs queue behind it (16 MiB calls
// moved a quarter fewer bytes per second than 128-256 KiB ones between two
// namespace hosts, and 128 KiB ones, aligned, 40% more than 256 KiB ones). A
// stamped message's
// first write is short, so that its timestamp marks the first bytes leaving
// (wire_first), and its first and last writes carry the control message that
// asks for timestamps: two reports of each kind per message, not per write.
// A flow that shares its I/O thread gives it to the others after
// kWritesPerTurn writes and goes on from a posted handler (yield()); any flow
// does once it wrote kMaxWrite bytes in the turn while work handed from another
// thread waits (as an incoming flow's turn of reads does: a message in one
// write leaves the turn at once whatever the count, a stamped message's short
// first write does not).
bool OutgoingFlow::write_some() {
  Bytes turn_bytes = 0;  // written this turn
  for (int turn = 0;; ++turn) {
    if (turn == writes_per_turn_ || (turn_bytes >= kMaxWrite && posts_ != nullptr && posts_->waiting())) {
      yield();
      return false;
    }
    std::array<iovec, 2> iov;  // the header's rest, one view of the payload buffer
    std::size_t n = 0;
    Bytes want = 0;
    if (header_left_ > 0) {
      iov[n++] = {header_.data() + (frame::kHeaderSize - header_left_), static_cast<std::size_t>(header_left_)};
      want += header_left_;
    }
    const Bytes budget = first_write_ && stamp_this_ ? kFirstWrite : kMaxWrite;
    if (const Bytes len = std::min({payload_left_, view_max_, budget}); len > 0) {
      iov[n++] = {const_cast<std::byte*>(aligned_view(payload_, cursor_.sent + static_cast<std::uint64_t>(want))),
                  static_cast<std::size_t>(len)};
      want += len;
    }
    const bool last = want == header_left_ + payload_left_;
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = n;
    alignas(cmsghdr) std::array<char, kTxStampControlSize> control;
    if (stamp_this_ && stamp_control_ && (first_write_ || last)) {
      msg.msg_control = control.data();
      msg.msg_controllen = tx_stamp_control(control.data(), stamp_sched_);
    }
    const ssize_t w = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_writable();
        return false;
      }
      if (errno == EINVAL && msg.msg_controllen > 0 && stamp_control_) {
        // A kernel that takes no timestamping control message: the socket
        // stamps every write instead.
        std::string why;
        stamp_control_ = false;
        if (!enable_tx_timestamps(fd_, true, stamp_sched_, &why)) stamps_.reset();
        continue;
      }
      fail_later(std::system_category().message(errno));
      return false;
    }
    if (stamps_ && (msg.msg_controllen > 0 || !stamp_control_)) ++stamped_writes_;
    turn_bytes += static_cast<Bytes>(w);
    first_write_ = false;
    cursor_.sent += static_cast<std::uint64_t>(w);
    Bytes took = static_cast<Bytes>(w);
    const Bytes from_header = std::min(took, header_left_);
    header_left_ -= from_header;
    payload_left_ -= took - from_header;
    if (header_left_ + payload_left_ == 0) return true;
    if (stamped_writes_ >= kMostStampedWrites) drain_stamps();  // a message of many stamped writes
    if (took < want) {  // the socket is full
      wait_writable();
      return false;
    }
  }
}

void OutgoingFlow::wait_writable() {
  sock_.async_wait(tcp::socket::wait_write, [this](const error_code& ec) {
    if (ec) {
      if (ec != asio::error::operation_aborted) events_.write_failed(*this, ec.message());
      return;
    }
    events_.progress();
    if (write_some() && message_written()) events_.sent(*this, action_, sent_at_);
  });
}

void OutgoingFlow::yield() {
  asio::post(sock_.get_executor(), [this] {
    if (!sock_.is_open()) return;  // closed meanwhile: the run stopped
    events_.progress();  // the turn before wrote
    if (write_some() && message_written()) events_.sent(*this, action_, sent_at_);
  });
}

void OutgoingFlow::fail_later(std::string why) {
  // Not from inside send(): the executor's loop that called it is still running.
  asio::post(sock_.get_executor(), [this, why = std::move(why)] { events_.write_failed(*this, why); });
}

bool OutgoingFlow::message_written() {
  const Nanos now = mono_now();
  sent_at_ = now;
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
  if (stamped_writes_ >= kDrainWrites) drain_stamps();  // after sent_app, so that the message's times do not hold it
  ++messages_;
  bytes_.store(bytes_.load(std::memory_order_relaxed) + r.bytes, std::memory_order_relaxed);
  events_.progress();
  if (credit_) {
    credit_poll_us_ = 100;
    credit_unsent_ = std::numeric_limits<int>::max();
    sent_when_credit();
    return false;
  }
  return true;
}

void OutgoingFlow::sent_when_credit() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
    fail_later(std::system_category().message(err));  // a reset leaves its unsent bytes counted
    return;
  }
  int unsent = 0;
  if (ioctl(fd_, SIOCOUTQNSD, &unsent) != 0 || static_cast<Bytes>(unsent) < kPriorityCredit) {
    // Through the executor, not from inside the send() that may have called this.
    asio::post(sock_.get_executor(), [this] { events_.sent(*this, action_, mono_now()); });
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

void OutgoingFlow::watch_stamps() {
  if (!stamps_) return;
  sock_.async_wait(tcp::socket::wait_error, [this](const error_code& ec) {
    if (ec) return;
    drain_stamps();
    watch_stamps();
  });
}

void OutgoingFlow::drain_stamps() {
  stamped_writes_ = 0;
  if (!stamps_) return;  // a kernel that refused them (write_some())
  std::size_t n;
  do {
    n = drain_tx_timestamps(fd_, stamp_buffer_.data(), stamp_buffer_.size());
    for (std::size_t i = 0; i < n; ++i) stamps_->apply(stamp_buffer_[i]);
    while (auto r = stamps_->pop()) recorder_.push(*r);
  } while (n == stamp_buffer_.size());
}

void OutgoingFlow::record_tcp_info(Nanos now) {
  const auto info = read_tcp_info(fd_);
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
  sock_.async_wait(tcp::socket::wait_read, [this](const error_code& ec) {
    // A timestamp report wakes this wait too (the kernel signals its error queue
    // as EPOLLERR, and Asio then completes every wait of the socket): the reports
    // are read and the wait goes on until the peer's FIN or an error. Taken for
    // the FIN, a report of the last message's wire time left its acknowledgement
    // unread, and counted lost, in about one run in six of a stream.
    if (!ec && stamps_ && !peer_finished()) {
      drain_stamps();
      finish();
      return;
    }
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

bool OutgoingFlow::peer_finished() const {
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void OutgoingFlow::close() {
  error_code ignored;
  credit_timer_.cancel();
  sock_.close(ignored);
}

}  // namespace tw

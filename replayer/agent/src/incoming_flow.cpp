#include "incoming_flow.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <system_error>

#include "clock.hpp"
#include "copy_alignment.hpp"
#include "flow_connector.hpp"
#include "tensorwire/util/tcp_congestion.hpp"

namespace tw {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

IncomingFlow::IncomingFlow(asio::io_context& ctx, const Profile& p, FlowIndex flow, RankId rank, Settings s,
                           std::vector<std::uint32_t>& seen, Recorder::Producer& recorder, Events& events)
    : p_(p),
      flow_(flow),
      rank_(rank),
      s_(s),
      seen_(seen),
      recorder_(recorder),
      events_(events),
      nap_(s.naps != nullptr ? s.naps->length() : 0),
      delay_timer_(ctx, s.spin) {
  if (s_.read_buffer.size() <= kCopySlack) {
    throw std::invalid_argument("IncomingFlow: a read buffer of " + std::to_string(s_.read_buffer.size()) + " bytes");
  }
  for (const Op& op : p_.ops) {
    if (op.type == OpType::send && op.flow == flow_) expected_ += s_.iterations;
  }
}

// A socket out of epoll for a nap is no longer sock_'s to close.
IncomingFlow::~IncomingFlow() {
  if (s_.naps != nullptr) s_.naps->leave(*this);
  if (released_) ::close(fd_);
}

void IncomingFlow::adopt(tcp::socket sock, std::string peer) {
  sock_.emplace(std::move(sock));
  peer_ = std::move(peer);
  error_code ec;
  sock_->non_blocking(true, ec);
  fd_ = sock_->native_handle();
  // For assign() after a nap: the socket's own family.
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0 && local.ss_family == AF_INET6) protocol_ = tcp::v6();
  // The receiving socket's algorithm stands for the sender's, which decides how
  // the bytes arrive: the same under --congestion-control, and otherwise each
  // host's default (the hosts of a cluster usually share one).
  const auto cc = congestion_control(sock_->native_handle());
  use_low_water_ = cc && paces(*cc);
}

void IncomingFlow::read() { wait_readable(); }

void IncomingFlow::close() {
  if (s_.naps != nullptr) s_.naps->leave(*this);
  if (released_) {
    ::close(fd_);  // out of the I/O loop for a nap: sock_ no longer holds it
    released_ = false;
    fd_ = -1;
    return;
  }
  error_code ignored;
  if (sock_) sock_->close(ignored);
  fd_ = -1;
}

std::string IncomingFlow::where() const {
  return "rank " + std::to_string(rank_) + ": " + flow_text(p_, flow_) + " from rank " + std::to_string(p_.flows[flow_].src) +
         " (" + peer_ + ")";
}

void IncomingFlow::wait_readable() {
  if (released_) {  // back into the I/O loop's epoll after naps
    error_code ec;
    sock_->assign(protocol_, fd_, ec);
    if (ec) {
      events_.failed(where() + ": " + ec.message());
      return;
    }
    released_ = false;
  }
  nap_.slept_in_epoll();
  sock_->async_wait(tcp::socket::wait_read, [this](const error_code& ec) {
    if (events_.stopped()) return;
    if (ec) {
      if (ec != asio::error::operation_aborted) events_.failed(where() + ": " + ec.message());
      return;
    }
    read_some();
  });
}

// Reads straight from the socket while it has data, each read decoded in
// place, then waits for more: no completion handler, no queued operation, no
// epoll_wait of the I/O loop per read (which on a virtual machine doubled the
// system time per byte). After kReadsPerTurn reads the flow yields its thread
// to the others (a flow that never runs dry would hold it for good), and once
// it read a full read's bytes in the turn while work handed from another thread
// waits (cross_posts.hpp).
void IncomingFlow::read_some() {
  const int fd = fd_;
  if (too_soon(fd)) {
    read_later();
    return;
  }
  const std::size_t full_read = aligned_view_size(s_.read_buffer.size());
  std::size_t turn_bytes = 0;  // read this turn
  for (int turn = 0; turn < kReadsPerTurn; ++turn) {
    if (turn_bytes >= full_read && s_.posts != nullptr && s_.posts->waiting()) break;
    std::byte* const at = aligned_view(s_.read_buffer, decoder_.bytes());  // the stream position
    const ssize_t n = ::recv(fd, at, full_read, MSG_DONTWAIT);
    if (n == 0) {
      peer_closed();
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        nap_.ran_dry();
        if (keep_looking()) {
          read_later();
          return;
        }
        if (nap()) return;
        set_low_water(fd);
        wait_readable();
        return;
      }
      events_.failed(where() + ": " + std::system_category().message(errno));
      return;
    }
    turn_bytes += static_cast<std::size_t>(n);
    read_at_ = mono_now();
    dry_since_ = 0;
    nap_.read(static_cast<std::uint64_t>(n));
    events_.progress();
    const std::uint64_t before = messages_;
    if (auto bad = decoder_.feed(std::span<const std::byte>(at, static_cast<std::size_t>(n)), *this)) {
      events_.failed(where() + ": bad frame: " + *bad);
      return;
    }
    sightings_.consumed(decoder_.bytes());
    if (events_.stopped()) return;
    // Only a read that ended a message gives the ops something to act on; the
    // others of a long message would each cost a post to the agent's thread
    // and, when it slept, a wake-up (64 a message of 8 MiB).
    if (messages_ == before) continue;
    events_.after_events(flow_);
    if (events_.stopped()) return;
  }
  read_later();
}

// From a posted handler: after the thread's other ready work.
void IncomingFlow::read_later() {
  asio::post(sock_->get_executor(), [this] {
    if (!events_.stopped()) read_some();
  });
}

// --read-gap-us. A receiver that drains each message as it lands makes Linux
// acknowledge nearly every one (more than a full segment unacknowledged and a
// window that does not shrink), and on one host the sender processes each
// acknowledgement inside its next sendmsg: with messages of 4 KiB, 0.93
// acknowledgements a message against a blocking reader's 0.2-0.3, and 4.5 us of
// the sender's CPU a message against 3.1 (docs/dataplane-analyses.md, Small messages).
// Looking again no sooner than the gap after the last bytes lets what arrives
// meanwhile gather into one read and one acknowledgement. Meanwhile the flow
// looks at how much the socket holds (sight()), which costs a system call like
// the read it replaces but sends no acknowledgement, so each message still gets
// the time its last byte was first seen (Sightings): the receive records keep
// the resolution of a look, as without the gap, and what the gap delays is the
// message's delivery to the ops. So the gap holds only while no op waits for the
// flow's messages (Executor::awaited): an op that waits makes the flow read at
// its next look, and a stream nobody waits for yet gathers. And only for
// messages under kGatherBelow (the last one, and the one being received): in
// paired rounds (Intel Xeon machine, 2026-12-05) the gap raised the rate of 16
// KiB and 32 KiB messages in 8 of 8 (by 10-15%), and lowered that of 64 KiB
// messages in 6 of 10 (medians 48 000 against 59 000 a second) and of four
// flows of 8 MiB messages in 6 of 6 (45 against 51 Gb/s); a large message is
// read kLowWater at a time anyway. A flow woken from epoll reads at once; a gap
// longer than the look (keep_looking()) keeps the flow looking until it has
// passed, then it reads once more before it sleeps.
// Without a gap, or when not looking again, no clock read: this is on every read.
bool IncomingFlow::too_soon(int fd) {
  if (s_.read_gap <= 0 || dry_since_ == 0 || !small_ || decoder_.payload_remaining() >= kGatherBelow ||
      events_.awaited(flow_)) {
    return false;
  }
  const Nanos now = mono_now();
  return now - read_at_ < s_.read_gap && sight(fd, now);
}

// Notes how far the stream reaches in the socket at `now`. False when the flow
// should read at once instead: kLowWater is there (a full read), the sightings
// are full, or the socket cannot say.
bool IncomingFlow::sight(int fd, Nanos now) {
  int queued = 0;
  if (::ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0) return false;
  if (queued == 0) return true;
  if (static_cast<std::uint64_t>(queued) >= kLowWater) return false;
  return sightings_.note(now, decoder_.bytes() + static_cast<std::uint64_t>(queued));
}

// A socket found empty is looked at again, after the thread's other work, for up
// to the agent's spin (--spin-us) before the flow sleeps in epoll. A sleeping
// reader must be woken for its next bytes, and the wake-up is paid by whoever
// queues them: on one host (loopback, a bridge between namespaces) the sender's
// core, where it cost more than the looking. Four flows of 8 MiB messages on one
// thread moved 38.7-44.5 Gb/s with a 20 us spin at the receiver against
// 35.6-39.1 without, the receiver sleeping a third as often (5 paired rounds,
// docs/dataplane-analyses.md). Without spin (agents or their threads crowding the
// cores) a flow sleeps at once, and so it does while the machine has no core to
// spare: every one taken by a runnable thread, the looking one included
// (spare_cores.hpp), where the look would hold a core that another thread, often
// the sender it waits for, is waiting for.
// At most kMostLook, whatever the spin before deadlines: the look bridges the gaps
// of a stream, and a receiver spinning 500 us after every message (--spin-us 500)
// took the sender's core often enough to double its start error's p99.
bool IncomingFlow::keep_looking() {
  if (s_.spin <= 0) return false;
  const Nanos now = mono_now();
  if (dry_since_ == 0) {
    if (s_.spare_cores != nullptr && !s_.spare_cores->spare(now)) {
      ++looks_skipped_;
      return false;
    }
    ++looks_;
    dry_since_ = now;
  }
  if (now - dry_since_ < std::min(s_.spin, kMostLook)) return true;
  dry_since_ = 0;
  return false;
}

// Instead of sleeping in epoll, where the flow has naps (an agent without a
// spin) and the rest of a long message is far off (read_nap.hpp): the socket
// leaves the I/O loop's epoll, whose next arrival would wake the thread, until
// the flow sleeps there again (wait_readable()), and the flow reads again when
// the nap ends. Leaving and coming back cost a system call each, once for a run
// of naps. Not where the flow waits with a low-water mark (a pacing sender): the
// mark already makes one wake-up of 128 KiB of a message, and a nap only delays
// its reads.
bool IncomingFlow::nap() {
  if (s_.naps == nullptr || use_low_water_) return false;
  const Nanos now = mono_now();
  if (!nap_.worth(now, first_byte_, decoder_.bytes() - message_at_, decoder_.payload_remaining())) return false;
  if (!released_) {
    error_code ec;
    sock_->release(ec);
    if (ec) return false;
    released_ = true;
  }
  nap_.began();
  s_.naps->nap(*this, now);
  return true;
}

void IncomingFlow::nap_ended() {
  if (fd_ >= 0 && !events_.stopped()) read_some();
}

// Before a wait, where the connection paces its sender (use_low_water_): wake
// when the rest of the message being received is there, or kLowWater of it, and
// at the first byte between messages. One wake-up and one full read per 128 KiB
// instead of one per paced burst. The kernel wakes the flow anyway when its
// receive window or memory runs short, or at the peer's FIN. A message's first
// and last bytes are read as they come, so its timestamps do not move.
// Only with a pacing algorithm: while fewer bytes than the mark wait, Linux
// acknowledges every arrival of more than a segment at once (__tcp_ack_snd_check,
// "If application uses SO_RCVLOWAT"). Paced bytes arrive a burst at a time and
// are acknowledged about as often without the mark, so there the mark saves
// wake-ups at no cost in acknowledgements; bursts (cubic) queue up while a
// reader wakes, and the mark doubles their acknowledgements. On one host, where
// both are paid on the sender's core (Intel Xeon machine, 2026-12-06, paired
// rounds, docs/dataplane-analyses.md):
// under BBR the mark took four flows of 8 MiB messages from 30-37 Gb/s to 45-57
// (3 of 3) and one flow of 1 MiB messages from a median 43 to 50 (4 of 5); under
// cubic it took one flow from 62-65 Gb/s to 52-54 (3 of 3), and a blocking pair
// of 1 MiB messages from 60-64 to 55-59 with 11-12 acknowledgements a message
// against 6.
void IncomingFlow::set_low_water(int fd) {
  if (!use_low_water_) return;
  const std::uint64_t rest = decoder_.payload_remaining();
  const int want = static_cast<int>(std::clamp<std::uint64_t>(rest, 1, kLowWater));
  if (want == low_water_) return;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0) low_water_ = want;
}

std::string IncomingFlow::validate(const frame::Header& h) {
  const std::optional<OpIndex> local = s_.ops != nullptr ? s_.ops->to_local(h.op) : std::optional<OpIndex>(h.op);
  if (!local || *local >= p_.ops.size() || p_.ops[*local].type != OpType::send || p_.ops[*local].flow != flow_) {
    return "op " + std::to_string(h.op) + " is not a message of this flow";
  }
  op_ = *local;
  const Op& op = p_.ops[op_];
  if (h.length != frame::wire_bytes(op.bytes)) {
    return "message " + op.id + " is " + std::to_string(h.length) + " bytes, the profile says " +
           std::to_string(frame::wire_bytes(op.bytes));
  }
  if (h.iteration != seen_[op_] || h.iteration >= s_.iterations) {
    return "message " + op.id + " of iteration " + std::to_string(h.iteration) + " arrived, expected iteration " +
           std::to_string(seen_[op_]);
  }
  return {};
}

void IncomingFlow::begin(const frame::Header&) {
  first_byte_ = sightings_.arrived(decoder_.bytes(), read_at_);
  message_at_ = decoder_.bytes();
}

void IncomingFlow::complete(const frame::Header& h) {
  ++seen_[op_];
  ++messages_;
  bytes_ += h.length;
  small_ = h.length < kGatherBelow;
  const Nanos arrival = sightings_.arrived(decoder_.bytes(), read_at_);
  // A read came after a wake-up, whose usual delay is part of the lag; a sighting did not.
  const Nanos woke = arrival == read_at_ && s_.wake_early != nullptr ? s_.wake_early->load(std::memory_order_relaxed) : 0;
  const Nanos lag = std::max<Nanos>(0, s_.read_lag - woke);
  // Never before its read, and in order: a lag estimate that moved never hands
  // a message over before the one before it.
  const Nanos deliver = std::max({arrival + s_.delay + lag, read_at_, last_delivery_});
  last_delivery_ = deliver;
  ReceiveRecord r;
  r.flags = p_.ops[op_].bytes < frame::kHeaderSize ? kFlagHeaderOnly : 0;
  r.rank = static_cast<std::uint16_t>(rank_);
  r.op = op_;
  r.iteration = h.iteration;
  r.flow = flow_;
  r.bytes = h.length;
  r.recv_first = first_byte_ + s_.realtime_offset;
  r.recv_last = arrival + s_.realtime_offset;
  r.delivered = deliver + s_.realtime_offset;
  recorder_.push(r);
  if (deliver == read_at_ && head_ == deliveries_.size()) {
    events_.received(op_, h.iteration, read_at_);
    return;
  }
  const bool idle = head_ == deliveries_.size();
  deliveries_.push_back({deliver, op_, h.iteration});
  if (idle) arm_delivery();
}

void IncomingFlow::arm_delivery() {
  if (head_ == deliveries_.size()) return;
  delay_timer_.at(deliveries_[head_].at, [this](Nanos now) {
    while (head_ < deliveries_.size() && deliveries_[head_].at <= now) {
      const Delivery d = deliveries_[head_++];
      events_.received(d.op, d.iteration, d.at);
    }
    if (head_ == deliveries_.size()) {
      deliveries_.clear();
      head_ = 0;
    } else if (head_ > 4096 && head_ * 2 > deliveries_.size()) {
      deliveries_.erase(deliveries_.begin(), deliveries_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    arm_delivery();
    events_.after_events(flow_);
  });
}

void IncomingFlow::peer_closed() {
  if (!decoder_.idle() || messages_ != expected_) {
    events_.failed(where() + ": the peer closed the connection after " + std::to_string(messages_) + " of " +
                   std::to_string(expected_) + " messages");
    return;
  }
  eof_.store(true, std::memory_order_release);
  close();
  events_.ended(*this);
}

}  // namespace tw

// One flow out of this rank: the socket, the message being written and its
// transmit timestamps. Writes a message as its header and views of one shared
// payload buffer, never allocating per message. Records a SendRecord per message
// and TxTimestampsRecords as the kernel reports. Single-threaded: the agent's I/O
// thread; the flow must outlive every operation it started (the Agent owns it).
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "recorder.hpp"
#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/frame.hpp"
#include "tx_stamp_tracker.hpp"
#include "tx_timestamps.hpp"

namespace tw {

class OutgoingFlow {
 public:
  // What the flow tells its owner; called on the I/O thread, must not throw.
  struct Events {
    virtual ~Events() = default;
    virtual void progress() = 0;  // a write completed
    virtual void sent(OutgoingFlow& flow, const Action& a, Nanos now) = 0;  // the kernel took the last byte
    virtual void write_failed(OutgoingFlow& flow, const std::string& why) = 0;
    virtual void closed(OutgoingFlow& flow) = 0;  // after finish(): the peer's FIN came, the socket is closed
  };

  // `payload` (at least 64 KiB or the largest message) and everything else must
  // outlive the flow. realtime_offset: CLOCK_REALTIME minus CLOCK_MONOTONIC.
  // prioritised: the flow's sends have priorities (see send()).
  OutgoingFlow(boost::asio::io_context& ctx, const Profile& p, FlowIndex flow, RankId rank, std::span<const std::byte> payload,
               Recorder& recorder, Events& events, Nanos realtime_offset, bool prioritised = false);

  // The handshake is done: takes the socket. With tx_timestamps, asks the kernel
  // for them; returns why it could not (empty when it could or was not asked).
  std::string attach(boost::asio::ip::tcp::socket sock, std::string peer, bool tx_timestamps);

  // Writes message `a` (one send op); Events::sent when the kernel has it all.
  // One message at a time: the executor does not start another before sent().
  // On a flow whose sends have priorities, Events::sent waits (after the
  // message is recorded as handed to the kernel) until less than
  // kPriorityCredit of it is still unsent, so that the executor picks the next
  // message only then: otherwise the socket buffer would hold several messages
  // in the order they came and the priorities would decide nothing
  // (ByteScheduler's credit).
  void send(const Action& a);
  static constexpr Bytes kPriorityCredit = 128 * kKiB;

  // Transmit timestamps are read from now on (at the start of the run).
  void watch_stamps();
  // Records a TCP_INFO snapshot at `now` (CLOCK_REALTIME); nothing if unavailable.
  void record_tcp_info(Nanos now);
  // Everything was sent: tell the peer (FIN).
  void shutdown_send();
  // Waits for the peer's FIN (which acknowledges all we sent), records the last
  // timestamps, closes, then Events::closed. Only while connected().
  void finish();
  void close();

  bool connected() const { return connected_; }
  FlowIndex flow() const { return flow_; }
  const std::string& peer() const { return peer_; }
  std::uint64_t bytes() const { return bytes_; }  // handed to the kernel so far
  std::uint64_t messages() const { return messages_; }
  std::uint64_t stamps_lost() const { return stamps_ ? stamps_->lost() : 0; }

 private:
  static constexpr std::size_t kRing = 4096;  // messages awaiting their ACK timestamp
  static constexpr Bytes kFirstWrite = 64 * kKiB;  // payload in the first write: bounds wire_first's lag

  void write_next(bool with_header);
  void sent_when_credit();
  void written(const boost::system::error_code& ec);
  void drain_stamps();

  const Profile& p_;
  FlowIndex flow_;
  RankId rank_;
  std::span<const std::byte> payload_;
  Recorder& recorder_;
  Events& events_;
  Nanos realtime_offset_;
  boost::asio::ip::tcp::socket sock_;
  bool connected_ = false;
  std::string peer_;
  std::array<std::byte, frame::kHeaderSize> header_{};
  Action action_{};
  std::array<boost::asio::const_buffer, 65> iov_{};
  Bytes remaining_ = 0;  // payload bytes not yet handed to a write
  Nanos ready_ = 0;
  bool credit_ = false;  // the flow's sends have priorities
  int credit_poll_us_ = 100;
  int credit_unsent_ = 0;  // unsent bytes at the last look
  boost::asio::steady_timer credit_timer_;
  std::uint64_t bytes_ = 0;
  std::uint64_t messages_ = 0;
  std::optional<TxStampTracker> stamps_;
  std::array<TxStamp, 64> stamp_buffer_{};
};

}  // namespace tw

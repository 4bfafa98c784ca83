// One flow out of this rank: the socket, the message being written and its
// transmit timestamps. Writes a message as its header and views of one shared
// payload buffer with non-blocking sendmsg calls of up to 128 KiB, straight from
// send() while the socket takes them and from a writability wait when it is
// full; never allocates per message. Records a SendRecord per message and
// TxTimestampsRecords as the kernel reports, for every message or every Nth
// (TxStampPolicy). Single-threaded: the I/O thread of the flow's io_context
// (attach() before that thread is told of the flow; bytes() from any thread);
// the flow must outlive every operation it started (the Agent owns it).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "copy_alignment.hpp"
#include "cross_posts.hpp"
#include "recorder.hpp"
#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/frame.hpp"
#include "tx_stamp_tracker.hpp"
#include "tx_timestamps.hpp"

namespace tw {

// Which messages ask the kernel for transmit timestamps, and which ones.
struct TxStampPolicy {
  bool on = false;
  bool sched = false;        // TX_SCHED too: where a queueing discipline can hold packets
  std::uint32_t every = 1;   // every Nth message of the flow (1: each)
};

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

  // `payload` (kCopySlack more than the longest view a write takes of it: up to
  // kMaxWrite, and the longer the fewer writes a message needs) and everything
  // else must outlive the flow; throws std::invalid_argument when it is not more
  // than kCopySlack; `cursor` is shared by the flows of the I/O thread
  // (copy_alignment.hpp). realtime_offset: CLOCK_REALTIME minus CLOCK_MONOTONIC.
  // prioritised: the flow's sends have priorities (see send()).
  // `ops`: the profile's op indices on the wire (those of the whole profile
  // when `p` is a slice).
  OutgoingFlow(boost::asio::io_context& ctx, const Profile& p, const IndexMap& ops, FlowIndex flow, RankId rank,
               std::span<const std::byte> payload, CopyCursor& cursor, Recorder::Producer& recorder, Events& events,
               Nanos realtime_offset, bool prioritised = false);

  // The handshake is done: takes the socket. With stamps.on, asks the kernel
  // for transmit timestamps; returns why it could not (empty when it could or
  // was not asked).
  std::string attach(boost::asio::ip::tcp::socket sock, std::string peer, const TxStampPolicy& stamps);

  // Writes message `a` (one send op). Returns when the kernel took it all if it
  // did within this call (the caller then counts it sent; Events::sent is not
  // called); otherwise Events::sent follows when it has.
  // One message at a time: the executor does not start another before it is sent.
  // On a flow whose sends have priorities, a message counts as sent (after it
  // is recorded as handed to the kernel) only once less than kPriorityCredit of
  // it is still unsent, so that the executor picks the next message only then:
  // otherwise the socket buffer would hold several messages in the order they
  // came and the priorities would decide nothing (ByteScheduler's credit).
  std::optional<Nanos> send(const Action& a);
  static constexpr Bytes kPriorityCredit = 128 * kKiB;

  // Transmit timestamps are read from now on (at the start of the run).
  void watch_stamps();
  // Records a TCP_INFO snapshot at `now` (CLOCK_REALTIME); nothing if unavailable.
  void record_tcp_info(Nanos now);
  // Everything was sent: tell the peer (FIN).
  void shutdown_send();
  // Waits for the peer's FIN (which acknowledges all we sent), records the last
  // timestamps, closes, then Events::closed. Once, and only if connected()
  // (which says the handshake was done, and stays true).
  void finish();
  void close();
  // The peer's FIN (or anything else, an error included) is there to read.
  bool peer_finished() const;

  // The flow's I/O thread also serves other flows: a message takes turns of
  // kWritesPerTurn writes with their work (after the constructor, before sending).
  // A flow that wrote until its socket was full (megabytes) left the others to
  // drain and refill in turns that deep: four flows of 8 MiB messages on one
  // thread moved 18.4-34.6 Gb/s between two testbed hosts, median 23.0, and
  // 20.4-38.3, median 37.6, taking turns (6 paired runs, docs/dataplane-analyses.md); as
  // iperf3 -P writes its streams. Alone on its thread a flow writes on: turns
  // cost a posted handler each, and one flow of 1 MiB messages taking them
  // moved 7% less (median of 6 paired runs). Either way a turn ends once it
  // wrote kMaxWrite bytes while work posted to the thread from another waits
  // (`posts`, null where the agent has one thread: cross_posts.hpp).
  void share_thread(bool shared, const CrossPosts* posts = nullptr) {
    writes_per_turn_ = shared ? kWritesPerTurn : -1;
    posts_ = posts;
  }
  static constexpr int kWritesPerTurn = 4;
  static constexpr Bytes kMaxWrite = 128 * kKiB;  // per sendmsg
  static constexpr Bytes kFirstWrite = 64 * kKiB;  // payload in a stamped message's first write: bounds wire_first's lag

  bool connected() const { return connected_; }
  FlowIndex flow() const { return flow_; }
  const std::string& peer() const { return peer_; }
  // Handed to the kernel so far; read from any thread.
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  std::uint64_t messages() const { return messages_; }
  std::uint64_t stamps_lost() const { return stamps_ ? stamps_->lost() : 0; }

 private:
  static constexpr std::size_t kRing = 4096;  // messages awaiting their ACK timestamp
  // The kernel queues a flow's reports within the socket's receive buffer (128 KiB
  // in a sending socket) and drops what does not fit (sock_queue_err_skb). A flow
  // that always finds room in its socket never returns to the event loop that
  // watches for them, so it reads them itself once kDrainWrites writes that ask for
  // them (up to 3 reports each) have gone, after the message that made it so is
  // handed over; within a message, at kMostStampedWrites (a message's first and
  // last writes ask, or, on a kernel that takes no control message, every write).
  // Streams of 64 KiB messages still lost 0-97 of their 100 000 fields a run, in
  // runs of consecutive messages, with reads every 32 such writes; none in 6 runs
  // with 16, at the same rate for 4 KiB messages (4 paired rounds).
  static constexpr std::uint32_t kDrainWrites = 16, kMostStampedWrites = 24;

  // Writes until the message is whole in the kernel (true), the socket is full
  // (false: a writability wait continues), its turn ended (false: a posted
  // handler continues) or the write failed (false).
  bool write_some();
  void wait_writable();
  void yield();  // goes on writing from a posted handler, after what is queued
  bool message_written();  // true: counts as sent now (no credit to wait for)
  void sent_when_credit();
  void fail_later(std::string why);
  void drain_stamps();

  const Profile& p_;
  const IndexMap& ops_;
  FlowIndex flow_;
  RankId rank_;
  std::span<const std::byte> payload_;
  Bytes view_max_;  // the longest aligned view of payload_
  CopyCursor& cursor_;
  Recorder::Producer& recorder_;
  Events& events_;
  Nanos realtime_offset_;
  boost::asio::ip::tcp::socket sock_;
  bool connected_ = false;
  std::string peer_;
  int fd_ = -1;
  std::array<std::byte, frame::kHeaderSize> header_{};
  Action action_{};
  Bytes header_left_ = 0;   // header bytes not yet taken by the kernel
  Bytes payload_left_ = 0;  // payload bytes not yet taken by the kernel
  bool first_write_ = false;
  int writes_per_turn_ = -1;  // -1: no turns (share_thread)
  const CrossPosts* posts_ = nullptr;
  bool stamp_this_ = false;  // the message being written asks for timestamps
  bool stamp_control_ = true;  // per message (a control message), else the socket stamps every write
  std::uint32_t stamp_every_ = 1, stamp_count_ = 0;
  std::uint32_t stamped_writes_ = 0;  // writes that asked for reports since they were last read
  bool stamp_sched_ = false;
  Nanos ready_ = 0;
  Nanos sent_at_ = 0;
  bool credit_ = false;  // the flow's sends have priorities
  int credit_poll_us_ = 100;
  int credit_unsent_ = 0;  // unsent bytes at the last look
  boost::asio::steady_timer credit_timer_;
  std::atomic<std::uint64_t> bytes_{0};  // written by the flow's thread only
  std::uint64_t messages_ = 0;
  std::optional<TxStampTracker> stamps_;
  std::array<TxStamp, 64> stamp_buffer_{};
};

}  // namespace tw

// One flow into this rank: reads the stream, checks every frame against the
// profile, records a ReceiveRecord per message and delivers it to the rank's ops,
// after the emulated one-way delay and the flow's read lag when there are any. Reads into its I/O thread's
// buffer and decodes in place: no allocation per message. Single-threaded: the
// I/O thread of the flow's io_context (adopt() and connected() on the thread
// that owns the flow, before that thread is told to read(); ended() from any);
// the flow must outlive every operation it started.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compute_pacer.hpp"
#include "cross_posts.hpp"
#include "precise_timer.hpp"
#include "nap_group.hpp"
#include "read_nap.hpp"
#include "recorder.hpp"
#include "sightings.hpp"
#include "spare_cores.hpp"
#include "tensorwire/core/frame.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_slice.hpp"

namespace tw {

class IncomingFlow final : private frame::Decoder::Callbacks, private NapGroup::Napper {
 public:
  // What the flow tells its owner; called on the I/O thread, must not throw.
  struct Events {
    virtual ~Events() = default;
    virtual bool stopped() const = 0;  // the run failed: stop reading
    virtual void progress() = 0;  // a read returned data
    virtual void received(OpIndex op, std::uint32_t iteration, Nanos at) = 0;  // delivered to the ops, at `at` (monotonic)
    virtual bool awaited(FlowIndex flow) const = 0;  // an op waits for a message of the flow (Executor::awaited)
    virtual void after_events(FlowIndex flow) = 0;  // after a read or a delivery: let the ops act
    virtual void failed(std::string why) = 0;  // the peer broke the stream
    virtual void ended(IncomingFlow& flow) = 0;  // the peer closed it after every message
  };

  struct Settings {
    Nanos delay = 0;  // emulated one-way latency
    // The flow's read lag (Flow::read_lag): a message goes to the ops that long
    // after it arrived, taken as its read less the agent's usual wake-up delay
    // (`wake_early`, WakeDelay::early() as the agent's timers last saw it, when
    // given), or as when it was seen in the socket while a read waited out the
    // gap (no wake-up came before that); never before its read.
    Nanos read_lag = 0;
    const std::atomic<Nanos>* wake_early = nullptr;
    // The delivery timer's spin, and how long a flow whose socket ran dry keeps
    // looking before it sleeps in epoll (keep_looking()).
    Nanos spin = 0;
    // The I/O thread's view of the machine's cores: a flow looks only while one
    // is spare (spare_cores.hpp). Null: it looks whenever it may.
    MachineSpareCores* spare_cores = nullptr;
    // While it looks again and no op waits for its messages (Events::awaited),
    // a flow reads no sooner than this after its last read that returned bytes
    // (read_some()).
    Nanos read_gap = 0;
    // A flow that ran dry in the middle of a long message naps with the I/O
    // thread's other flows, out of epoll, instead of being woken by each
    // arrival (read_nap.hpp); not where it waits with a low-water mark. Given
    // only where the flow does not look (the Agent's, without a spin). Null: it
    // sleeps in epoll.
    NapGroup* naps = nullptr;
    // Where reads land: shared by the flows of one I/O thread (a read is
    // decoded before the next begins), so that memory grows with the threads,
    // not with the flows. Must outlive the flow and hold more than kCopySlack
    // bytes: each read lands at the flow's stream position modulo kCopyAlign
    // (copy_alignment.hpp).
    std::span<std::byte> read_buffer;
    // Work handed to the I/O thread from another (cross_posts.hpp): while any
    // waits, a turn of reads ends once it read a full read's bytes (of
    // read_buffer). Null: turns of kReadsPerTurn reads.
    const CrossPosts* posts = nullptr;
    std::uint64_t iterations = 0;
    Nanos realtime_offset = 0;  // CLOCK_REALTIME minus CLOCK_MONOTONIC
    // The op indices on the wire: the whole profile's when the profile is a slice.
    const IndexMap* ops = nullptr;
  };

  // `seen[op]`: how many iterations of each op arrived, shared by the rank's
  // incoming flows. Everything must outlive the flow.
  IncomingFlow(boost::asio::io_context& ctx, const Profile& p, FlowIndex flow, RankId rank, Settings s,
               std::vector<std::uint32_t>& seen, Recorder::Producer& recorder, Events& events);
  ~IncomingFlow() override;
  IncomingFlow(const IncomingFlow&) = delete;
  IncomingFlow& operator=(const IncomingFlow&) = delete;

  // The handshake is done: takes the socket (of the flow's io_context)...
  void adopt(boost::asio::ip::tcp::socket sock, std::string peer);
  // ...and, on the flow's thread, starts reading.
  void read();
  void start(boost::asio::ip::tcp::socket sock, std::string peer) {
    adopt(std::move(sock), std::move(peer));
    read();
  }
  void close();

  bool connected() const { return sock_.has_value(); }
  bool ended() const { return eof_.load(std::memory_order_acquire); }
  FlowIndex flow() const { return flow_; }
  std::uint64_t messages() const { return messages_; }
  std::uint64_t bytes() const { return bytes_; }
  // Times a socket found dry was looked at again, and times it was not for want
  // of a spare core (keep_looking()).
  std::uint64_t looks() const { return looks_; }
  std::uint64_t looks_skipped() const { return looks_skipped_; }
  // Naps taken out of epoll (read_nap.hpp).
  std::uint64_t naps() const { return nap_.naps(); }

 private:
  struct Delivery {
    Nanos at;
    OpIndex op;
    std::uint32_t iteration;
  };

  static constexpr int kReadsPerTurn = 16;
  static constexpr Nanos kMostLook = 20 * kMicro;  // keep_looking()
  // The most a wait for more of a message asks the kernel to gather before it
  // wakes the flow (SO_RCVLOWAT): a full read (the agent's read buffer).
  static constexpr std::uint64_t kLowWater = 128 * 1024;
  // The read gap holds for messages smaller than this (too_soon()).
  static constexpr std::uint64_t kGatherBelow = 64 * 1024;
  void set_low_water(int fd);
  void wait_readable();
  void read_some();
  void read_later();
  bool keep_looking();
  bool nap();
  void nap_ended() override;
  bool too_soon(int fd);
  bool sight(int fd, Nanos now);
  void peer_closed();
  std::string where() const;
  void arm_delivery();

  std::string validate(const frame::Header& h) override;
  void begin(const frame::Header& h) override;
  void complete(const frame::Header& h) override;

  const Profile& p_;
  FlowIndex flow_;
  RankId rank_;
  Settings s_;
  std::vector<std::uint32_t>& seen_;
  Recorder::Producer& recorder_;
  Events& events_;
  std::uint64_t expected_ = 0;  // messages in the run
  std::uint64_t message_at_ = 0;  // the stream position where the message being received began
  std::optional<boost::asio::ip::tcp::socket> sock_;
  // The socket's descriptor, also while it is out of the I/O loop's epoll for a
  // nap (released_: sock_ no longer holds it).
  int fd_ = -1;
  bool released_ = false;
  boost::asio::ip::tcp protocol_ = boost::asio::ip::tcp::v4();
  ReadNap nap_;
  std::string peer_;
  frame::Decoder decoder_;
  Nanos read_at_ = 0;  // when the read being decoded returned
  Nanos first_byte_ = 0;  // of the message being received
  OpIndex op_ = 0;  // the slice's index of the message being received (validate())
  std::atomic<bool> eof_{false};
  std::uint64_t messages_ = 0, bytes_ = 0;
  std::uint64_t looks_ = 0, looks_skipped_ = 0;
  int low_water_ = 1;  // the socket's SO_RCVLOWAT
  bool use_low_water_ = false;  // this socket's congestion control paces (adopt(), set_low_water())
  Nanos dry_since_ = 0;  // when the socket was last found empty, 0 once read from
  bool small_ = true;  // the last message was smaller than kGatherBelow (too_soon())
  Sightings sightings_;  // while a read waits out the gap (sight())
  // Messages waiting out the delay: one delay per flow, so in arrival order.
  // Popped from head_, cleared when empty: the vector keeps its capacity.
  Nanos last_delivery_ = 0;
  std::vector<Delivery> deliveries_;
  std::size_t head_ = 0;
  PreciseTimer delay_timer_;
};

}  // namespace tw

// The agent's I/O: Boost.Asio on one thread for sockets, timers and the
// executor; a recorder thread that streams results to disk. Setup (listening,
// connecting, handshakes) is written as coroutines; the per-message hot path
// (writes, reads, timers) as callbacks on long-lived per-flow state, so that no
// message allocates.
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/agent/agent.hpp"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <boost/asio.hpp>
#include <concurrentqueue/concurrentqueue.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <mutex>
#include <queue>
#include <thread>

#include "tcp_info.hpp"
#include "tx_timestamps.hpp"
#include "tensorwire/core/records.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/controller/control.hpp"
#include "tensorwire/core/frame.hpp"

namespace tw {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

Nanos clock_ns(clockid_t id) {
  timespec ts;
  ::clock_gettime(id, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}
Nanos mono_now() { return clock_ns(CLOCK_MONOTONIC); }

std::chrono::steady_clock::time_point steady_at(Nanos mono) {
  // libstdc++'s steady_clock is CLOCK_MONOTONIC.
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(mono));
}

// Streams records to a file from its own thread. push() never blocks and never
// allocates: the queue is sized up front and a full queue drops (and counts).
// The writer sleeps when the queue is empty instead of spinning on a semaphore:
// on small machines every core is needed by the agents.
class Recorder {
 public:
  explicit Recorder(const std::string& path)
      : queue_(kCapacity, 1, 0), token_(queue_), file_(path), thread_([this] { run(); }) {}
  ~Recorder() { stop(); }

  void push(const Record& r) {
    if (!queue_.try_enqueue(token_, r)) ++dropped_;
  }

  // Drains the queue, closes the file; returns its first error (errno) or 0.
  int stop() {
    if (thread_.joinable()) {
      stopping_ = true;
      thread_.join();
      file_.close();
    }
    return file_.error();
  }
  std::uint64_t written() const { return file_.written(); }
  std::uint64_t dropped() const { return dropped_; }

 private:
  static constexpr std::size_t kCapacity = 1 << 18;  // 16 MiB of records in flight at most

  void run() {
    std::vector<Record> batch(4096);
    for (;;) {
      const bool last = stopping_;  // read before draining: nothing is pushed after stop()
      std::size_t n;
      while ((n = queue_.try_dequeue_bulk(batch.data(), batch.size())) > 0) file_.write(batch.data(), n);
      if (last) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  moodycamel::ConcurrentQueue<Record> queue_;
  moodycamel::ProducerToken token_;
  RecordFile file_;
  std::atomic<bool> stopping_{false};
  std::uint64_t dropped_ = 0;
  std::thread thread_;
};

// Calls a function at a monotonic deadline: sleeps on a timer until `spin`
// before it, then busy-waits the rest. One pending call at a time; arming again
// replaces it.
class PreciseTimer {
 public:
  PreciseTimer(asio::io_context& ctx, Nanos spin) : timer_(ctx), spin_(spin) {}

  template <typename F>
  void at(Nanos deadline, F fn) {
    ++generation_;
    timer_.expires_at(steady_at(deadline - spin_));
    timer_.async_wait([this, deadline, fn = std::move(fn), g = generation_](const error_code& ec) mutable {
      if (ec || g != generation_) return;
      Nanos now = mono_now();
      while (now < deadline && spin_ > 0) now = mono_now();
      fn(now);
    });
  }
  void cancel() {
    ++generation_;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  Nanos spin_;
  std::uint64_t generation_ = 0;
};

long max_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

std::string endpoint_text(const tcp::socket& s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

class Agent {
 public:
  Agent(const Profile& p, const AgentConfig& c)
      : p_(p),
        c_(c),
        rank_(c.rank),
        executor_(p, c.rank, c.executor),
        wake_(ctx_, c.spin),
        compute_timer_(ctx_, c.spin),
        delay_timer_(ctx_, c.spin),
        watchdog_(ctx_),
        signals_(ctx_, SIGINT, SIGTERM),
        recorder_(run_dir::records_file(c.out_dir, c.rank)) {
    digest_ = frame::profile_digest(p_);
    iterations_ = executor_.iterations();
    recv_seen_.assign(p_.ops.size(), 0);
    slot_of_flow_.assign(p_.flows.size(), -1);
    Bytes largest = frame::kHeaderSize;
    for (std::size_t f = 0; f < p_.flows.size(); ++f) {
      if (p_.flows[f].src == rank_) {
        slot_of_flow_[f] = static_cast<int>(out_.size());
        out_.push_back(std::make_unique<Outgoing>(ctx_, static_cast<FlowIndex>(f)));
      } else if (p_.flows[f].dst == rank_) {
        slot_of_flow_[f] = static_cast<int>(in_.size());
        in_.push_back(std::make_unique<Incoming>(static_cast<FlowIndex>(f)));
        const RankId src = p_.flows[f].src;
        in_.back()->delay = c.delay + (src < c.delay_from.size() ? c.delay_from[src] : 0);
      }
    }
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.rank == rank_) largest = std::max(largest, frame::wire_bytes(op.bytes));
    }
    payload_.assign(static_cast<std::size_t>(std::min<Bytes>(largest, kMaxChunk)), std::byte{0});
    progress_every_ = std::max<std::uint64_t>(1, iterations_ / 10);
  }

  ~Agent() {
    if (mailbox_) {
      std::lock_guard lock(mailbox_->mutex);
      mailbox_->ctx = nullptr;
    }
  }

  void run() {
    realtime_offset_ = clock_ns(CLOCK_REALTIME) - mono_now();
    if (c_.link) attach_link();
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (!ec) fail("rank " + std::to_string(rank_) + ": interrupted by signal " + std::to_string(sig));
    });
    setup_deadline_ = mono_now() + c_.connect_timeout;
    last_progress_ = mono_now();
    watch();
    open_listener();
    for (auto& o : out_) asio::co_spawn(ctx_, connect_flow(*o), [this](std::exception_ptr e) { rethrow_as_failure(e); });
    check_connected();
    ctx_.run();
    run_max_rss_kib_ = max_rss_kib();  // the run's own peak, before the summary is built
    finish_files();
    if (!error_.empty()) throw std::runtime_error(error_);
  }

 private:
  static constexpr Bytes kMaxChunk = 256 * kKiB;
  // Reads: large buffers cut system calls (a 4 MiB buffer moves 1.4x the bytes of a
  // 256 KiB one on loopback); sized per flow by its largest message, within a
  // budget for ranks with many flows.
  static constexpr std::size_t kMinReadBuffer = 256 * 1024;
  static constexpr std::size_t kMaxReadBuffer = 4 * 1024 * 1024;
  static constexpr std::size_t kReadBudget = 256 * 1024 * 1024;
  static constexpr Nanos kTcpInfoEvery = 10 * kMilli;
  static constexpr std::size_t kRing = 4096;  // messages awaiting their ACK timestamp, per flow
  static constexpr Bytes kFirstWrite = 64 * kKiB;  // payload in the first write: bounds wire_first's lag

  struct InFlight {
    std::uint64_t begin = 0, end = 0;  // stream offsets of the message
    OpIndex op = 0;
    std::uint32_t iteration = 0;
    std::array<Nanos, 5> t{-1, -1, -1, -1, -1};  // sched_first, wire_first, wire_last, acked, sched_last
  };

  struct Outgoing {
    Outgoing(asio::io_context& ctx, FlowIndex f) : flow(f), sock(ctx) {}
    FlowIndex flow;
    tcp::socket sock;
    bool connected = false;
    std::string peer;
    std::array<std::byte, frame::kHeaderSize> header{};
    Action action{};
    std::array<asio::const_buffer, 65> iov{};
    Bytes remaining = 0;  // payload bytes not yet handed to a write
    std::uint64_t bytes = 0;  // handed to the kernel so far
    Nanos ready = 0;
    // Transmit timestamps: messages whose final ACK has not been reported yet,
    // as a ring in stream order, and the stream offset of the next message.
    bool stamps = false;
    std::vector<InFlight> ring;
    std::size_t head = 0, count = 0;
    std::uint64_t offset = 0;
  };

  struct Incoming;
  struct Sink final : frame::Decoder::Callbacks {
    Agent* agent = nullptr;
    Incoming* in = nullptr;
    std::string validate(const frame::Header& h) override { return agent->validate(*in, h); }
    void begin(const frame::Header& h) override { agent->message_begin(*in, h); }
    void complete(const frame::Header& h) override { agent->message_complete(*in, h); }
  };

  struct Incoming {
    explicit Incoming(FlowIndex f) : flow(f) {}
    FlowIndex flow;
    std::optional<tcp::socket> sock;
    std::string peer;
    frame::Decoder decoder;
    Sink sink;
    std::vector<std::byte> buffer;
    Nanos read_at = 0;  // when the read being decoded returned
    Nanos delay = 0;  // emulated latency of this flow
    Nanos first_byte = 0;  // of the message being received
    bool eof = false;
    std::uint64_t messages = 0;
  };

  struct Delivery {
    Nanos at;
    OpIndex op;
    std::uint32_t iteration;
    bool operator>(const Delivery& o) const { return at > o.at; }
  };

  // ---- a controller connection ----------------------------------------------

  // Calls from the link's thread are posted into this agent's context, for as
  // long as it exists.
  struct Mailbox {
    std::mutex mutex;
    asio::io_context* ctx = nullptr;
  };

  void attach_link() {
    mailbox_ = std::make_shared<Mailbox>();
    mailbox_->ctx = &ctx_;
    const auto post = [box = mailbox_](auto fn) {
      std::lock_guard lock(box->mutex);
      if (box->ctx) asio::post(*box->ctx, std::move(fn));
    };
    AgentSteering s;
    s.start = [this, post](Nanos at) { post([this, at] { start_at(at); }); };
    s.stop = [this, post](std::string why) { post([this, why = std::move(why)] { fail("rank " + std::to_string(rank_) + ": " + why); }); };
    c_.link->attach(std::move(s));
  }

  void start_at(Nanos realtime) {
    if (!error_.empty() || !awaiting_start_) return;
    awaiting_start_ = false;
    const Nanos begin_mono = realtime - realtime_offset_;
    if (begin_mono > mono_now()) {
      wake_.at(begin_mono, [this](Nanos now) { begin(now); });
    } else {
      begin(mono_now());
    }
  }

  // ---- failure and progress ------------------------------------------------

  void fail(std::string message) {
    if (!error_.empty()) return;
    error_ = std::move(message);
    shutdown_all();
  }

  void rethrow_as_failure(const std::exception_ptr& e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      fail(ex.what());
    }
  }

  void shutdown_all() {
    error_code ignored;
    signals_.cancel(ignored);
    watchdog_.cancel();
    wake_.cancel();
    compute_timer_.cancel();
    delay_timer_.cancel();
    if (acceptor_) acceptor_->close(ignored);
    for (auto& o : out_) o->sock.close(ignored);
    for (auto& in : in_) {
      if (in->sock) in->sock->close(ignored);
    }
    for (auto* s : pending_) s->close(ignored);
    ctx_.stop();
  }

  void progress() { last_progress_ = mono_now(); }

  std::string flow_text(FlowIndex f) const {
    const Flow& fl = p_.flows[f];
    return "flow " + fl.id + " (rank " + std::to_string(fl.src) + " -> rank " + std::to_string(fl.dst) + ")";
  }

  void watch() {
    watchdog_.expires_after(std::chrono::milliseconds(200));
    watchdog_.async_wait([this](const error_code& ec) {
      if (ec || !error_.empty()) return;
      const Nanos now = mono_now();
      if (!started_ && now > setup_deadline_) {
        fail("rank " + std::to_string(rank_) + ": flows not connected after " + human_duration(c_.connect_timeout) +
             ": " + unconnected());
        return;
      }
      if (started_ && !awaiting_start_ && now - last_progress_ > c_.idle_timeout) {
        fail("rank " + std::to_string(rank_) + ": no progress for " + human_duration(c_.idle_timeout) + "; at " +
             (executor_.finished() ? std::string("the end, waiting for peers to finish") : executor_.waiting_for()));
        return;
      }
      watch();
    });
  }

  std::string unconnected() const {
    std::string out;
    int n = 0;
    for (const auto& o : out_) {
      if (!o->connected && n++ < 3) {
        const auto& e = c_.roster.ranks.at(p_.flows[o->flow].dst);
        out += (out.empty() ? "" : ", ") + flow_text(o->flow) + " to " + e.host + ":" + std::to_string(e.port);
      }
    }
    for (const auto& in : in_) {
      if (!in->sock && n++ < 3) out += (out.empty() ? "" : ", ") + flow_text(in->flow) + " not yet dialled in";
    }
    return out;
  }

  // ---- setup -----------------------------------------------------------------

  void open_listener() {
    if (in_.empty()) return;  // nothing to accept: listen on nothing
    if (c_.listen_fd >= 0) {
      acceptor_.emplace(ctx_);
      error_code ec;
      const int fd = c_.listen_fd;
      sockaddr_storage sa{};
      socklen_t len = sizeof sa;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
      acceptor_->assign(sa.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
      if (ec) throw std::runtime_error("rank " + std::to_string(rank_) + ": inherited listening socket: " + ec.message());
    } else {
      const auto& me = c_.roster.ranks.at(rank_);
      error_code ec;
      tcp::resolver resolver(ctx_);
      const auto results = resolver.resolve(me.host, std::to_string(me.port), tcp::resolver::passive, ec);
      if (ec || results.empty()) {
        throw std::runtime_error("rank " + std::to_string(rank_) + ": cannot resolve own address " + me.host + ": " + ec.message());
      }
      const tcp::endpoint ep = *results.begin();
      acceptor_.emplace(ctx_);
      acceptor_->open(ep.protocol(), ec);
      if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor_->bind(ep, ec);
      if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        throw std::runtime_error("rank " + std::to_string(rank_) + ": cannot listen on " + me.host + ":" +
                                 std::to_string(me.port) + ": " + ec.message());
      }
    }
    asio::co_spawn(ctx_, accept_loop(), [this](std::exception_ptr e) { rethrow_as_failure(e); });
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, sock] = co_await acceptor_->async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec == asio::error::operation_aborted || !acceptor_->is_open()) co_return;
      if (ec) continue;  // a transient accept error (e.g. the peer gave up): keep listening
      asio::co_spawn(ctx_, handshake_in(std::move(sock)), [this](std::exception_ptr e) { rethrow_as_failure(e); });
    }
  }

  // Closes `sock` if `guard` expires first: a deadline for the next operation on
  // it. The caller cancels the guard when the operation completes.
  static void close_after(asio::steady_timer& guard, tcp::socket& sock, Nanos timeout) {
    guard.expires_after(std::chrono::nanoseconds(timeout));
    guard.async_wait([&sock](const error_code& ec) {
      if (!ec) {
        error_code ignored;
        sock.close(ignored);
      }
    });
  }

  // Reads `buffer` fully within `timeout`; false on error or timeout.
  template <typename Buffer>
  asio::awaitable<bool> read_within(tcp::socket& sock, Buffer buffer, Nanos timeout) {
    asio::steady_timer guard(ctx_);
    close_after(guard, sock, timeout);
    auto [ec, n] = co_await asio::async_read(sock, buffer, asio::as_tuple(asio::use_awaitable));
    guard.cancel();
    co_return !ec;
  }

  asio::awaitable<void> handshake_in(tcp::socket sock) {
    pending_.push_back(&sock);
    struct Unlist {
      std::vector<tcp::socket*>& v;
      tcp::socket* s;
      ~Unlist() { v.erase(std::remove(v.begin(), v.end(), s), v.end()); }
    } unlist{pending_, &sock};
    const std::string peer = endpoint_text(sock);
    std::array<std::byte, frame::kHelloFixedSize> fixed{};
    if (!co_await read_within(sock, asio::buffer(fixed), 5 * kSecond)) co_return;  // strangers that say nothing
    std::string why;
    const auto prefix = frame::decode_hello_prefix(fixed, &why);
    if (!prefix) {
      log("rejected a connection from " + peer + ": " + why);
      co_return;
    }
    std::string token(prefix->token_size, '\0');
    if (prefix->token_size > 0 && !co_await read_within(sock, asio::buffer(token), 5 * kSecond)) co_return;
    const frame::Hello& h = prefix->hello;
    frame::AcceptStatus status = frame::AcceptStatus::ok;
    if (!same_token(token, c_.roster.token)) {
      status = frame::AcceptStatus::bad_token;
    } else if (h.flow >= p_.flows.size() || p_.flows[h.flow].dst != rank_ || p_.flows[h.flow].src != h.src) {
      status = frame::AcceptStatus::bad_flow;
    } else if (h.profile_digest != digest_) {
      status = frame::AcceptStatus::bad_profile;
    } else if (in_[static_cast<std::size_t>(slot_of_flow_[h.flow])]->sock) {
      status = frame::AcceptStatus::duplicate;
    }
    const auto reply = frame::encode_accept(status);
    auto [ec, n] = co_await asio::async_write(sock, asio::buffer(reply), asio::as_tuple(asio::use_awaitable));
    if (status != frame::AcceptStatus::ok) {
      log("rejected a connection from " + peer + ": " + frame::accept_status_text(status));
      co_return;
    }
    if (ec || !error_.empty()) co_return;
    Incoming& in = *in_[static_cast<std::size_t>(slot_of_flow_[h.flow])];
    sock.set_option(tcp::no_delay(true), ec);
    in.peer = peer;
    in.sock.emplace(std::move(sock));
    in.buffer.resize(read_buffer_size(in.flow));
    in.sink.agent = this;
    in.sink.in = &in;
    read_more(in);
    check_connected();
  }

  std::size_t read_buffer_size(FlowIndex flow) const {
    Bytes largest = 0;
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.flow == flow) largest = std::max(largest, frame::wire_bytes(op.bytes));
    }
    const std::size_t budget = std::max(kMinReadBuffer, kReadBudget / std::max<std::size_t>(in_.size(), 1));
    return std::clamp(static_cast<std::size_t>(std::min<Bytes>(largest, kMaxReadBuffer)), kMinReadBuffer,
                      std::min(kMaxReadBuffer, budget));
  }

  asio::awaitable<void> connect_flow(Outgoing& o) {
    const RankId dst = p_.flows[o.flow].dst;
    const auto& e = c_.roster.ranks.at(dst);
    const std::string where = e.host + ":" + std::to_string(e.port);
    tcp::resolver resolver(ctx_);
    Nanos backoff = 50 * kMilli;
    std::string last_error = "no attempt";
    for (;;) {
      if (!error_.empty()) co_return;
      if (mono_now() > setup_deadline_) {
        throw std::runtime_error("rank " + std::to_string(rank_) + ": " + flow_text(o.flow) + ": cannot connect to rank " +
                                 std::to_string(dst) + " at " + where + " within " + human_duration(c_.connect_timeout) +
                                 " (" + last_error + ")");
      }
      auto [rec, results] = co_await resolver.async_resolve(e.host, std::to_string(e.port), asio::as_tuple(asio::use_awaitable));
      if (!rec) {
        tcp::socket sock(ctx_);
        asio::steady_timer guard(ctx_);
        close_after(guard, sock, 2 * kSecond);
        auto [cec, ep] = co_await asio::async_connect(sock, results, asio::as_tuple(asio::use_awaitable));
        guard.cancel();
        if (!cec) {
          error_code ec;
          sock.set_option(tcp::no_delay(true), ec);
          const std::string hello = frame::encode_hello({o.flow, rank_, digest_, c_.roster.token});
          auto [wec, wn] = co_await asio::async_write(sock, asio::buffer(hello), asio::as_tuple(asio::use_awaitable));
          std::array<std::byte, frame::kAcceptSize> reply{};
          if (!wec && co_await read_within(sock, asio::buffer(reply), 10 * kSecond)) {
            const auto status = frame::decode_accept(reply);
            if (!status) {
              throw std::runtime_error("rank " + std::to_string(rank_) + ": " + flow_text(o.flow) + ": " + where +
                                       " is not a tensorwire agent");
            }
            if (*status != frame::AcceptStatus::ok) {
              throw std::runtime_error("rank " + std::to_string(rank_) + ": " + flow_text(o.flow) + ": rank " +
                                       std::to_string(dst) + " at " + where +
                                       " refused the connection: " + frame::accept_status_text(*status));
            }
            o.peer = where;
            o.sock = std::move(sock);
            o.connected = true;
            std::string why;
            if (c_.tx_timestamps) {
              o.stamps = enable_tx_timestamps(o.sock.native_handle(), &why);
              if (o.stamps) {
                o.ring.resize(kRing);
              } else {
                log(flow_text(o.flow) + ": no transmit timestamps (" + why + ")");
              }
            }
            check_connected();
            co_return;
          }
          last_error = wec ? wec.message() : "no answer to the handshake";
        } else {
          last_error = cec.message();
        }
      } else {
        last_error = rec.message();
      }
      asio::steady_timer pause(ctx_);
      pause.expires_after(std::chrono::nanoseconds(backoff));
      co_await pause.async_wait(asio::use_awaitable);
      backoff = std::min<Nanos>(backoff * 2, kSecond);
    }
  }

  void check_connected() {
    if (started_ || !error_.empty()) return;
    for (const auto& o : out_) {
      if (!o->connected) return;
    }
    for (const auto& in : in_) {
      if (!in->sock) return;
    }
    // Everything expected is here: stop listening.
    if (acceptor_) {
      error_code ignored;
      acceptor_->close(ignored);
    }
    started_ = true;
    if (c_.link) {
      // The controller starts every agent at one instant.
      awaiting_start_ = true;
      c_.link->connected();
      return;
    }
    const Nanos begin_mono = c_.start_at ? *c_.start_at - realtime_offset_ : mono_now();
    if (begin_mono > mono_now()) {
      wake_.at(begin_mono, [this](Nanos now) { begin(now); });
    } else {
      begin(mono_now());
    }
  }

  // ---- the run ---------------------------------------------------------------

  void begin(Nanos now) {
    log("connected; starting");
    progress();
    started_at_ = now;
    for (auto& o : out_) {
      if (o->stamps) watch_stamps(*o);
    }
    executor_.start(now);
    pump();
  }

  // ---- transmit timestamps ---------------------------------------------------

  void watch_stamps(Outgoing& o) {
    o.sock.async_wait(tcp::socket::wait_error, [this, &o](const error_code& ec) {
      if (ec || !error_.empty()) return;
      drain_stamps(o);
      watch_stamps(o);
    });
  }

  void drain_stamps(Outgoing& o) {
    std::size_t n;
    do {
      n = drain_tx_timestamps(o.sock.native_handle(), stamp_buffer_.data(), stamp_buffer_.size());
      for (std::size_t i = 0; i < n; ++i) apply_stamp(o, stamp_buffer_[i]);
    } while (n == stamp_buffer_.size());
  }

  // A report for stream offset `key` at time t tells, for every message whose
  // last byte is at or before `key`, that its last byte had reached that point by
  // t (the kernel merges segments, and ACKs are cumulative, so reports for some
  // offsets never come); for the message holding `key`, that its first bytes had.
  // Each field keeps the first report that covers it.
  void apply_stamp(Outgoing& o, const TxStamp& s) {
    if (o.count == 0) return;
    // Keys are 32-bit stream offsets: unwrap them against the oldest message.
    const std::uint64_t base = o.ring[o.head].begin;
    const std::uint64_t key = base + static_cast<std::uint32_t>(s.key - static_cast<std::uint32_t>(base));
    const std::size_t first_field = s.type == TxStamp::Type::sched ? 0 : 1;  // ACKs have no "first"
    const std::size_t last_field = s.type == TxStamp::Type::sched ? 4 : s.type == TxStamp::Type::software ? 2 : 3;
    for (std::size_t k = 0; k < o.count; ++k) {
      InFlight& m = o.ring[(o.head + k) % kRing];
      if (m.begin > key) break;
      if (s.type != TxStamp::Type::ack && m.t[first_field] < 0) m.t[first_field] = s.realtime_ns;
      if (m.end - 1 <= key && m.t[last_field] < 0) m.t[last_field] = s.realtime_ns;
    }
    while (o.count > 0 && o.ring[o.head].t[3] >= 0) emit_stamps(o);
  }

  void emit_stamps(Outgoing& o) {
    const InFlight& m = o.ring[o.head];
    TxTimestampsRecord r;
    r.rank = static_cast<std::uint16_t>(rank_);
    r.op = m.op;
    r.iteration = m.iteration;
    r.flow = o.flow;
    r.bytes = m.end - m.begin;
    r.sched_first = m.t[0];
    r.wire_first = m.t[1];
    r.wire_last = m.t[2];
    r.acked = m.t[3];
    r.sched_last = m.t[4];
    recorder_.push(r);
    for (std::size_t i : {std::size_t{2}, std::size_t{3}, std::size_t{4}}) stamps_lost_ += m.t[i] < 0 ? 1 : 0;
    o.head = (o.head + 1) % kRing;
    --o.count;
  }

  void track_stamps(Outgoing& o, const Action& a, Bytes wire) {
    if (!o.stamps) return;
    if (o.count == kRing) emit_stamps(o);  // too many unacknowledged messages: give up on the oldest
    InFlight& m = o.ring[(o.head + o.count) % kRing];
    m = InFlight{o.offset, o.offset + wire, a.op, a.iteration, {-1, -1, -1, -1, -1}};
    o.offset += wire;
    ++o.count;
  }

  // At the end of a flow: whatever the kernel still has; what never came is lost.
  void flush_stamps(Outgoing& o) {
    if (!o.stamps) return;
    drain_stamps(o);
    while (o.count > 0) emit_stamps(o);
  }

  Nanos real(Nanos mono) const { return mono + realtime_offset_; }

  void pump() {
    if (!error_.empty()) return;
    Action a;
    while (executor_.next_action(a)) {
      if (a.kind == Action::Kind::compute) {
        start_compute(a);
      } else {
        start_send(a);
      }
    }
    Executor::IterationTimes it;
    while (executor_.pop_completed(it)) iteration_done(it);
    if (const auto w = executor_.next_wake(); w && (!armed_wake_ || *w < *armed_wake_)) {
      armed_wake_ = w;
      wake_.at(*w, [this](Nanos now) {
        armed_wake_.reset();
        executor_.tick(now);
        pump();
      });
    }
    if (executor_.finished() && !finishing_) start_finishing();
  }

  void start_compute(const Action& a) {
    const Nanos start = mono_now();
    compute_timer_.at(start + a.duration, [this, a, start](Nanos now) {
      ComputeRecord r;
      r.rank = static_cast<std::uint16_t>(rank_);
      r.op = a.op;
      r.iteration = a.iteration;
      r.planned = real(a.at);
      r.start = real(start);
      r.end = real(now);
      recorder_.push(r);
      progress();
      executor_.compute_done(a.op, a.iteration, now);
      pump();
    });
  }

  void start_send(const Action& a) {
    const Op& op = p_.ops[a.op];
    Outgoing& o = *out_[static_cast<std::size_t>(slot_of_flow_[op.flow])];
    const Bytes wire = frame::wire_bytes(op.bytes);
    frame::encode_header({a.iteration, a.op, wire}, o.header);
    o.action = a;
    o.remaining = wire - frame::kHeaderSize;
    track_stamps(o, a, wire);
    o.ready = mono_now();
    write_next(o, true);
  }

  // Writes the header (first call of a message) and up to kIovecs views of the
  // payload buffer. The buffer is small enough to stay in cache and is repeated
  // across the iovecs, so large messages go out in few system calls.
  void write_next(Outgoing& o, bool with_header) {
    std::size_t n = 0;
    if (with_header) {
      // The first write is short, so that its transmit timestamp marks the
      // message's first bytes leaving (wire_first).
      o.iov[n++] = asio::buffer(o.header);
      const std::size_t len = static_cast<std::size_t>(std::min<Bytes>({o.remaining, payload_.size(), kFirstWrite}));
      if (len > 0) o.iov[n++] = asio::buffer(payload_.data(), len);
      o.remaining -= len;
    } else {
      while (n < o.iov.size() && o.remaining > 0) {
      const std::size_t len = static_cast<std::size_t>(std::min<Bytes>(o.remaining, payload_.size()));
        o.iov[n++] = asio::buffer(payload_.data(), len);
        o.remaining -= len;
      }
    }
    // Asio's default completion condition caps every write at 64 KiB (1000 system
    // calls per 64 MiB message); let each write take as much as the kernel will.
    asio::async_write(
        o.sock, std::span<const asio::const_buffer>(o.iov.data(), n),
        [](const error_code& ec, std::size_t) -> std::size_t { return ec ? 0 : std::numeric_limits<std::size_t>::max(); },
        [this, &o](const error_code& ec, std::size_t) { written(o, ec); });
  }

  void written(Outgoing& o, const error_code& ec) {
    if (ec) {
      if (error_.empty()) {
        fail("rank " + std::to_string(rank_) + ": " + flow_text(o.flow) + " to rank " + std::to_string(p_.flows[o.flow].dst) +
             " (" + o.peer + "): write failed: " + ec.message());
      }
      return;
    }
    progress();
    if (o.remaining > 0) {
      write_next(o, false);
      return;
    }
    const Nanos now = mono_now();
    const Op& op = p_.ops[o.action.op];
    SendRecord r;
    r.flags = op.bytes < frame::kHeaderSize ? kFlagHeaderOnly : 0;
    r.rank = static_cast<std::uint16_t>(rank_);
    r.op = o.action.op;
    r.iteration = o.action.iteration;
    r.flow = o.flow;
    r.bytes = frame::wire_bytes(op.bytes);
    r.planned = real(o.action.at);
    r.ready = real(o.ready);
    r.sent_app = real(now);
    recorder_.push(r);
    ++messages_sent_;
    bytes_sent_ += r.bytes;
    o.bytes += r.bytes;
    executor_.send_done(o.action.op, o.action.iteration, now);
    pump();
  }

  void read_more(Incoming& in) {
    in.sock->async_read_some(asio::buffer(in.buffer), [this, &in](const error_code& ec, std::size_t n) {
      if (!error_.empty()) return;
      if (ec == asio::error::eof) {
        peer_closed(in);
        return;
      }
      if (ec) {
        if (ec != asio::error::operation_aborted) {
          fail("rank " + std::to_string(rank_) + ": " + flow_text(in.flow) + " from rank " +
               std::to_string(p_.flows[in.flow].src) + " (" + in.peer + "): " + ec.message());
        }
        return;
      }
      in.read_at = mono_now();
      progress();
      if (auto bad = in.decoder.feed(std::span<const std::byte>(in.buffer.data(), n), in.sink)) {
        fail("rank " + std::to_string(rank_) + ": " + flow_text(in.flow) + " from rank " +
             std::to_string(p_.flows[in.flow].src) + " (" + in.peer + "): bad frame: " + *bad);
        return;
      }
      if (!error_.empty()) return;
      pump();
      read_more(in);
    });
  }

  std::string validate(const Incoming& in, const frame::Header& h) {
    if (h.op >= p_.ops.size() || p_.ops[h.op].type != OpType::send || p_.ops[h.op].flow != in.flow) {
      return "op " + std::to_string(h.op) + " is not a message of this flow";
    }
    const Op& op = p_.ops[h.op];
    if (h.length != frame::wire_bytes(op.bytes)) {
      return "message " + op.id + " is " + std::to_string(h.length) + " bytes, the profile says " +
             std::to_string(frame::wire_bytes(op.bytes));
    }
    if (h.iteration != recv_seen_[h.op] || h.iteration >= iterations_) {
      return "message " + op.id + " of iteration " + std::to_string(h.iteration) + " arrived, expected iteration " +
             std::to_string(recv_seen_[h.op]);
    }
    return {};
  }

  void message_begin(Incoming& in, const frame::Header&) { in.first_byte = in.read_at; }

  void message_complete(Incoming& in, const frame::Header& h) {
    ++recv_seen_[h.op];
    ++in.messages;
    ++messages_received_;
    bytes_received_ += h.length;
    const Nanos deliver = in.read_at + in.delay;
    ReceiveRecord r;
    r.flags = p_.ops[h.op].bytes < frame::kHeaderSize ? kFlagHeaderOnly : 0;
    r.rank = static_cast<std::uint16_t>(rank_);
    r.op = h.op;
    r.iteration = h.iteration;
    r.flow = in.flow;
    r.bytes = h.length;
    r.recv_first = real(in.first_byte);
    r.recv_last = real(in.read_at);
    r.delivered = real(deliver);
    recorder_.push(r);
    if (in.delay == 0) {
      executor_.received(h.op, h.iteration, in.read_at);
      return;
    }
    deliveries_.push({deliver, h.op, h.iteration});
    arm_delivery();
  }

  void arm_delivery() {
    if (deliveries_.empty()) return;
    delay_timer_.at(deliveries_.top().at, [this](Nanos now) {
      while (!deliveries_.empty() && deliveries_.top().at <= now) {
        const Delivery d = deliveries_.top();
        deliveries_.pop();
        executor_.received(d.op, d.iteration, d.at);
      }
      arm_delivery();
      pump();
    });
  }

  void peer_closed(Incoming& in) {
    std::uint64_t expected = 0;
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.flow == in.flow) expected += iterations_;
    }
    if (!in.decoder.idle() || in.messages != expected) {
      fail("rank " + std::to_string(rank_) + ": " + flow_text(in.flow) + " from rank " + std::to_string(p_.flows[in.flow].src) +
           " (" + in.peer + "): the peer closed the connection after " + std::to_string(in.messages) + " of " +
           std::to_string(expected) + " messages");
      return;
    }
    in.eof = true;
    error_code ignored;
    in.sock->close(ignored);
    maybe_stop();
  }

  void iteration_done(const Executor::IterationTimes& it) {
    IterationRecord r;
    r.rank = static_cast<std::uint16_t>(rank_);
    r.iteration = it.iteration;
    r.start = real(it.start);
    r.end = real(it.end);
    recorder_.push(r);
    iteration_times_.push_back({real(it.start), real(it.end)});
    if (c_.link) {
      link_bytes_.clear();
      for (const auto& o : out_) link_bytes_.emplace_back(o->flow, o->bytes);
      c_.link->iteration(it.iteration, real(it.start), real(it.end), link_bytes_);
    }
    if (!c_.quiet && (it.iteration + 1) % progress_every_ == 0) {
      log("iteration " + std::to_string(it.iteration) + " took " + human_duration(it.end - it.start));
    }
    // TCP_INFO after an iteration, at most every 10 ms (and after the last one).
    const Nanos mono = mono_now();
    if (mono - last_tcp_info_ < kTcpInfoEvery && it.iteration + 1 != iterations_) return;
    last_tcp_info_ = mono;
    const Nanos now = real(mono);
    for (const auto& o : out_) {
      const auto info = read_tcp_info(o->sock.native_handle());
      if (!info) continue;
      TcpInfoRecord t;
      t.rank = static_cast<std::uint16_t>(rank_);
      t.snd_cwnd = info->snd_cwnd;
      t.total_retrans = info->total_retrans;
      t.flow = o->flow;
      t.sndbuf_limited_ns = static_cast<Nanos>(info->sndbuf_limited_us) * 1000;
      t.at = now;
      t.rtt_ns = static_cast<Nanos>(info->rtt_us) * 1000;
      t.rttvar_ns = static_cast<Nanos>(info->rttvar_us) * 1000;
      t.busy_ns = static_cast<Nanos>(info->busy_us) * 1000;
      t.rwnd_limited_ns = static_cast<Nanos>(info->rwnd_limited_us) * 1000;
      recorder_.push(t);
    }
  }

  void start_finishing() {
    finishing_ = true;
    finished_at_ = mono_now();
    // Everything this rank sends has been handed to the kernel: tell the peers.
    for (auto& o : out_) {
      error_code ignored;
      o->sock.shutdown(tcp::socket::shutdown_send, ignored);
    }
    maybe_stop();
  }

  void maybe_stop() {
    if (!finishing_) return;
    for (const auto& in : in_) {
      if (!in->eof) return;
    }
    // Wait for the peers' FINs on our outgoing sockets, so no connection is reset
    // while a peer still reads; the idle watchdog bounds the wait.
    for (auto& o : out_) {
      if (!o->connected) continue;
      o->connected = false;
      ++closing_;
      o->sock.async_wait(tcp::socket::wait_read, [this, &o = *o](const error_code&) {
        // The FIN acknowledges all we sent: the last ACK reports are queued now.
        flush_stamps(o);
        error_code ignored;
        o.sock.close(ignored);
        if (--closing_ == 0) done();
      });
    }
    if (closing_ == 0) done();
  }

  void done() {
    error_code ignored;
    watchdog_.cancel();
    signals_.cancel(ignored);
    ctx_.stop();
  }

  void log(const std::string& msg) {
    if (!c_.quiet) std::fprintf(stderr, "tensorwire agent %u: %s\n", rank_, msg.c_str());
  }

  void finish_files() {
    const int rec_error = recorder_.stop();
    if (rec_error != 0 && error_.empty()) {
      error_ = "rank " + std::to_string(rank_) + ": cannot write results to " + run_dir::records_file(c_.out_dir, rank_) + ": " +
               std::strerror(rec_error);
    }
    nlohmann::json j;
    j["rank"] = rank_;
    j["profile"] = c_.profile_path;
    j["profile_digest"] = digest_;
    j["iterations"] = iterations_;
    j["finished"] = error_.empty() && executor_.finished();
    j["error"] = error_;
    j["clock"] = {{"records", "CLOCK_REALTIME"}, {"realtime_minus_monotonic_ns", realtime_offset_}};
    j["start_ns"] = started_at_ ? real(started_at_) : 0;
    j["end_ns"] = finished_at_ ? real(finished_at_) : 0;
    nlohmann::json its = nlohmann::json::array();
    for (const auto& [s, e] : iteration_times_) its.push_back({s, e});
    j["iteration_times_ns"] = std::move(its);
    j["counters"] = {{"messages_sent", messages_sent_},       {"bytes_sent", bytes_sent_},
                     {"messages_received", messages_received_}, {"bytes_received", bytes_received_},
                     {"records_written", recorder_.written()},   {"records_dropped", recorder_.dropped()},
                     {"tx_timestamps_lost", stamps_lost_},     {"max_rss_kib", run_max_rss_kib_}};
    j["options"] = {{"open_loop", c_.executor.open_loop}, {"slowdown", c_.executor.slowdown},
                    {"spin_ns", c_.spin},                 {"delay_ns", c_.delay},
                    {"tx_timestamps", c_.tx_timestamps}};
    try {
      write_file_atomic(run_dir::summary_file(c_.out_dir, rank_), j.dump(2) + "\n");
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = "rank " + std::to_string(rank_) + ": " + e.what();
    }
  }

  const Profile& p_;
  const AgentConfig& c_;
  RankId rank_;
  asio::io_context ctx_{1};
  Executor executor_;
  PreciseTimer wake_;
  PreciseTimer compute_timer_;
  PreciseTimer delay_timer_;
  asio::steady_timer watchdog_;
  asio::signal_set signals_;
  Recorder recorder_;
  std::optional<tcp::acceptor> acceptor_;
  std::vector<tcp::socket*> pending_;
  std::vector<std::unique_ptr<Outgoing>> out_;
  std::vector<std::unique_ptr<Incoming>> in_;
  std::vector<int> slot_of_flow_;
  std::vector<std::uint32_t> recv_seen_;
  std::vector<std::byte> payload_;
  std::priority_queue<Delivery, std::vector<Delivery>, std::greater<Delivery>> deliveries_;
  std::vector<std::pair<Nanos, Nanos>> iteration_times_;
  std::optional<Nanos> armed_wake_;
  std::array<TxStamp, 64> stamp_buffer_{};
  std::uint64_t stamps_lost_ = 0;
  long run_max_rss_kib_ = 0;
  Nanos last_tcp_info_ = -kSecond;
  std::uint64_t digest_ = 0;
  std::uint64_t iterations_ = 0;
  Nanos realtime_offset_ = 0;
  Nanos setup_deadline_ = 0;
  Nanos last_progress_ = 0;
  Nanos started_at_ = 0;
  Nanos finished_at_ = 0;
  bool started_ = false;
  bool awaiting_start_ = false;  // connected; the controller has not said when to begin
  bool finishing_ = false;
  std::shared_ptr<Mailbox> mailbox_;
  std::vector<std::pair<FlowIndex, std::uint64_t>> link_bytes_;
  int closing_ = 0;
  std::uint64_t progress_every_ = 1;
  std::uint64_t messages_sent_ = 0, bytes_sent_ = 0, messages_received_ = 0, bytes_received_ = 0;
  std::string error_;
};

}  // namespace

void run_agent(const Profile& profile, const AgentConfig& config) {
  if (config.rank >= profile.ranks.size()) {
    throw std::runtime_error("rank " + std::to_string(config.rank) + " is not in the profile (" +
                             std::to_string(profile.ranks.size()) + " ranks)");
  }
  if (config.roster.ranks.size() != profile.ranks.size()) {
    throw std::runtime_error("the roster lists " + std::to_string(config.roster.ranks.size()) + " ranks, the profile has " +
                             std::to_string(profile.ranks.size()));
  }
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) throw std::runtime_error(config.out_dir + ": cannot create: " + ec.message());
  // Wake-ups as close to the deadline as the kernel allows.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  Agent agent(profile, config);
  agent.run();
}

}  // namespace tw

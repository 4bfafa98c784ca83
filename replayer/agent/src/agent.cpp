// The Agent wires the data plane together and owns the run's life cycle: the
// listener and the flows' handshakes (FlowConnector), the flows (OutgoingFlow,
// IncomingFlow), the executor driven by precise timers, the watchdog, the
// recorder and the summary. Threads: the main I/O thread (the one that calls
// run()) runs the executor, the timers, the set-up and its share of the flows;
// with io_threads > 1 the flows are dealt round-robin over it and io_threads - 1
// worker threads, each with its own io_context, and everything between a flow and
// the executor is posted between the two threads (a flow's events in the order
// the flow raised them). The recorder has its own thread, fed by one producer per
// I/O thread; AgentSteering is called from the link's thread and posts into the
// main context. Setup is written as coroutines (each started with
// net::spawn_task, so its failure ends the run); the per-message hot path as
// callbacks on long-lived per-flow state, so that no message allocates.
#include "tensorwire/agent/agent.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "clock.hpp"
#include "compute_pacer.hpp"
#include "cross_posts.hpp"
#include "flow_connector.hpp"
#include "incoming_flow.hpp"
#include "outgoing_flow.hpp"
#include "precise_timer.hpp"
#include "qdisc.hpp"
#include "record_budget.hpp"
#include "recorder.hpp"
#include "run_summary.hpp"
#include "tensorwire/core/frame.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/net/accept_loop.hpp"
#include "tensorwire/net/admission.hpp"
#include "tensorwire/net/listener.hpp"
#include "tensorwire/net/task.hpp"
#include "tensorwire/util/parallel.hpp"
#include "tensorwire/util/tcp_congestion.hpp"

namespace tw {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

long max_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A handshake in progress, listed so that a failure closes its socket.
class Listed {
 public:
  Listed(std::vector<tcp::socket*>& list, tcp::socket& s) : list_(list), s_(&s) { list_.push_back(s_); }
  ~Listed() { list_.erase(std::remove(list_.begin(), list_.end(), s_), list_.end()); }
  Listed(const Listed&) = delete;
  Listed& operator=(const Listed&) = delete;

 private:
  std::vector<tcp::socket*>& list_;
  tcp::socket* s_;
};

class Agent final : private OutgoingFlow::Events, private IncomingFlow::Events {
 public:
  // `congestion`: the algorithm the data sockets will use (probe_congestion_control()).
  Agent(const Profile& p, const AgentConfig& c, UniqueFd listen_fd, std::string congestion)
      : p_(p),
        c_(c),
        rank_(c.rank),
        realtime_offset_(clock_ns(CLOCK_REALTIME) - mono_now()),
        digest_(c.profile_digest ? *c.profile_digest : frame::profile_digest(p)),
        listen_fd_(std::move(listen_fd)),
        threads_(std::max<std::uint32_t>(1, c.io_threads)),
        executor_(p, c.rank, c.executor),
        iterations_(executor_.iterations()),
        wake_(ctx_, c.spin),
        compute_timer_(ctx_, c.spin),
        watchdog_(ctx_),
        signals_(ctx_, SIGINT, SIGTERM),
        recorder_(run_dir::records_file(c.out_dir, c.rank), threads_, &c.ops, &c.flows, most_records(p, c.rank, iterations_)),
        congestion_(std::move(congestion)),
        connector_(p, c.flows, c.roster, c.rank, digest_, [this](const std::string& m) { log(m); }, c.congestion_control) {
    recv_seen_.assign(p_.ops.size(), 0);
    slot_of_flow_.assign(p_.flows.size(), -1);
    for (std::size_t t = 1; t < threads_; ++t) workers_.push_back(std::make_unique<Worker>(*this, t));
    // Work handed between threads goes ahead of the flows' turns (cross_posts.hpp).
    if (threads_ > 1) {
      for (std::size_t t = 0; t < threads_; ++t) cross_posts_.push_back(std::make_unique<CrossPosts>());
    }
    read_buffers_.resize(threads_);
    for (auto& b : read_buffers_) b.resize(kReadBuffer + kCopySlack);
    // A flow looks at its dry socket only while the machine has a core to spare
    // (spare_cores.hpp): not asked without a spin, nor where the agent's I/O
    // threads have cores of their own (--pin, --realtime), whatever else runs.
    if (c.spin > 0 && !c.pin && !c.realtime) {
      const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
      for (std::size_t t = 0; t < threads_; ++t) spare_cores_.push_back(std::make_unique<MachineSpareCores>(cores));
    }
    // Naps (read_nap.hpp) only without a spin: where the agent's threads crowd
    // the cores for the whole run (`run --testbed` then runs agents with
    // --spin-us 0), not where a look was skipped for want of a spare core a
    // moment ago. There a nap held a flow's bytes for up to two naps after a core
    // came free: four flows of 8 MiB on one I/O thread moved a median 36.8 Gb/s
    // against 47.8 without naps under cubic, 31.0 against 35.4 under bbr (3
    // rounds each, 2026-12-07, docs/dataplane-analyses.md, Naps).
    if (c.read_nap > 0 && c.spin <= 0) {
      for (std::size_t t = 0; t < threads_; ++t) nap_groups_.push_back(std::make_unique<NapGroup>(io(t), c.read_nap));
    }
    copy_cursors_.resize(threads_);
    Bytes largest = frame::kHeaderSize;
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.rank == rank_) largest = std::max(largest, frame::wire_bytes(op.bytes));
    }
    payload_.assign(static_cast<std::size_t>(std::min<Bytes>(largest, kMaxChunk)) + kCopySlack, std::byte{0});
    std::vector<char> prioritised(p_.flows.size(), 0);
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.priority != 0) prioritised[op.flow] = 1;
    }
    for (std::size_t f = 0; f < p_.flows.size(); ++f) {
      const auto flow = static_cast<FlowIndex>(f);
      if (p_.flows[f].src == rank_) {
        const std::size_t t = out_.size() % threads_;
        slot_of_flow_[f] = static_cast<int>(out_.size());
        out_thread_.push_back(t);
        out_.push_back(std::make_unique<OutgoingFlow>(io(t), p_, c.ops, flow, rank_, payload_, copy_cursors_[t], recorder_.producer(t), out_events(t),
                                                      realtime_offset_, prioritised[f] != 0));
      } else if (p_.flows[f].dst == rank_) {
        // Incoming flows dealt from the other end, so that a rank that sends
        // and receives as much spreads both over its threads.
        const std::size_t t = (threads_ - 1 - in_.size() % threads_);
        slot_of_flow_[f] = static_cast<int>(in_.size());
        in_thread_.push_back(t);
        const RankId src = p_.flows[f].src;
        IncomingFlow::Settings s;
        s.delay = c.delay + (src < c.delay_from.size() ? c.delay_from[src] : 0);
        s.read_lag = p_.flows[f].read_lag;
        s.wake_early = &wake_early_;
        s.spin = c.spin;
        s.spare_cores = spare_cores_.empty() ? nullptr : spare_cores_[t].get();
        s.read_gap = c.read_gap;
        s.naps = nap_groups_.empty() ? nullptr : nap_groups_[t].get();
        s.read_buffer = read_buffers_[t];
        s.posts = cross_posts_.empty() ? nullptr : cross_posts_[t].get();
        s.iterations = iterations_;
        s.realtime_offset = realtime_offset_;
        s.ops = &c.ops;
        in_.push_back(std::make_unique<IncomingFlow>(io(t), p_, flow, rank_, s, recv_seen_, recorder_.producer(t), in_events(t)));
      }
    }
    awaited_ = std::make_unique<std::atomic<bool>[]>(p_.flows.size());
    for (FlowIndex f = 0; f < p_.flows.size(); ++f) awaited_[f].store(true, std::memory_order_relaxed);
    // A flow takes turns with the others of its I/O thread.
    std::vector<std::size_t> flows_on(threads_, 0);
    for (const std::size_t t : out_thread_) ++flows_on[t];
    for (const std::size_t t : in_thread_) ++flows_on[t];
    for (std::size_t i = 0; i < out_.size(); ++i) {
      out_[i]->share_thread(flows_on[out_thread_[i]] > 1, cross_posts_.empty() ? nullptr : cross_posts_[out_thread_[i]].get());
    }
    progress_every_ = std::max<std::uint64_t>(1, iterations_ / 10);
  }

  ~Agent() override {
    if (mailbox_) {
      std::lock_guard lock(mailbox_->mutex);
      mailbox_->ctx = nullptr;
    }
    stop_workers();
  }

  void run() {
    if (c_.pin) {
      if (const int cpu = pin_thread(0); cpu >= 0) pinned_cores_.push_back(cpu);
    }
    if (c_.realtime) realtime_applied_ = make_realtime();
    if (c_.sched_batch) sched_batch_applied_ = make_batch();
    for (auto& w : workers_) w->start();
    if (c_.link) attach_link();
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (!ec) fail(who() + ": interrupted by signal " + std::to_string(sig));
    });
    setup_deadline_ = mono_now() + c_.connect_timeout;
    progress();
    watch();
    open_listener();
    for (auto& o : out_) spawn(connect_flow(*o));
    check_connected();
    ctx_.run();
    stop_workers();
    run_max_rss_kib_ = max_rss_kib();  // the run's own peak, before the summary is built
    finish_files();
    if (!error_.empty()) throw std::runtime_error(error_);
  }

 private:
  // The payload buffer: as long as the longest write (OutgoingFlow::kMaxWrite),
  // so that it stays in the core's cache.
  static constexpr Bytes kMaxChunk = 128 * kKiB;
  // Reads of at most 128 KiB: the buffer stays in the core's cache while the
  // kernel copies into it. 4 MiB buffers moved 20-30% fewer bytes per second
  // between two namespace hosts than 128-256 KiB ones; with reads and writes
  // aligned (copy_alignment.hpp), 128 KiB reads and writes moved 40% more than
  // 256 KiB ones, and 64 KiB ones less (one flow of 8 MiB messages, sender CPU
  // time per byte down by a third).
  static constexpr std::size_t kReadBuffer = 128 * 1024;
  static constexpr Nanos kTcpInfoEvery = 10 * kMilli;

  std::string who() const { return "rank " + std::to_string(rank_); }
  Nanos real(Nanos mono) const { return mono + realtime_offset_; }
  OutgoingFlow& outgoing(FlowIndex f) { return *out_[static_cast<std::size_t>(slot_of_flow_[f])]; }
  IncomingFlow& incoming(FlowIndex f) { return *in_[static_cast<std::size_t>(slot_of_flow_[f])]; }

  void spawn(asio::awaitable<void> task) {
    net::spawn_task(ctx_, std::move(task), [this](const std::string& what) { fail(what); });
  }

  // --pin: this (the I/O) thread on one of the cores the agent may use, chosen
  // by rank so that the agents of a host spread over them, and the recorder's
  // thread with the first (left free, it ran beside the other agent of a host
  // and cost a third of a flow's rate). Returns the core, or -1.
  int pin_thread(std::size_t index) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0) return -1;
    // Each agent of the host steps by its share of the cores, or by its threads
    // where they are more: the same for all, whatever threads each took.
    const auto cores = static_cast<std::size_t>(CPU_COUNT(&allowed));
    const std::size_t stride = std::max<std::size_t>({1, c_.io_threads, cores / std::max<std::size_t>(1, c_.machine_agents)});
    int pick = static_cast<int>((rank_ * stride + index) % cores);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed) || pick-- > 0) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (::sched_setaffinity(0, sizeof one, &one) != 0) {
        log("--pin: cannot pin to core " + std::to_string(cpu) + ": " + std::strerror(errno));
        return -1;
      }
      if (index == 0) recorder_.pin(cpu);
      return cpu;
    }
    return -1;
  }

  // --realtime: this (the I/O) thread at SCHED_FIFO. Without the privilege (root
  // or CAP_SYS_NICE), says so and runs as it was.
  bool make_realtime() {
    sched_param sp{};
    sp.sched_priority = 50;
    if (::sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
      log(std::string("--realtime: not permitted (") + std::strerror(errno) + "); running at normal priority");
      return false;
    }
    return true;
  }

  // --sched-batch: this (the I/O) thread at SCHED_BATCH, which any thread may
  // choose. Woken by a socket or a timer, it no longer preempts the thread
  // running on its core (Linux: batch threads do not preempt at wake-up); it
  // runs when that one sleeps or its turn ends, and at once on an idle core.
  // A sender and its receiver sharing a core otherwise take it from each other
  // at every few segments: with 16 flows between two agents on a 2-core host the
  // machine switched threads about a tenth as often per byte at this policy as
  // at the normal one, and in most runs moved more (docs/BENCHMARKS.md, Agents
  // sharing cores). Off unless asked for: a woken thread may wait up to a
  // scheduler slice for its core. True when the thread runs at it.
  bool make_batch() {
    sched_param sp{};
    if (::sched_setscheduler(0, SCHED_BATCH, &sp) != 0) {
      log(std::string("--sched-batch: not applied (") + std::strerror(errno) + "); running at the normal policy");
      return false;
    }
    return ::sched_getscheduler(0) == SCHED_BATCH;
  }

  // ---- I/O threads ------------------------------------------------------------

  // A worker I/O thread: its io_context, kept running until stop_workers().
  struct Worker {
    Worker(Agent& a, std::size_t index) : agent(a), index(index), relay(a) {}
    ~Worker() { stop(); }
    void start() {
      thread = std::thread([this] {
        if (agent.c_.pin) cpu = agent.pin_thread(index);
        if (agent.c_.realtime) realtime = agent.make_realtime();
        if (agent.c_.sched_batch) batch = agent.make_batch();
        ctx.run();
      });
    }
    // After what was posted to it before.
    void stop() {
      if (!thread.joinable()) return;
      asio::post(ctx, [this] { ctx.stop(); });
      thread.join();
    }
    Agent& agent;
    std::size_t index;
    asio::io_context ctx{1};
    asio::executor_work_guard<asio::io_context::executor_type> guard{ctx.get_executor()};
    std::thread thread;
    int cpu = -1;
    bool realtime = false;
    bool batch = false;

    // The events of this thread's flows, passed to the agent on the main thread.
    struct Relay final : OutgoingFlow::Events, IncomingFlow::Events {
      explicit Relay(Agent& a) : agent(a) {}
      void progress() override { agent.progress(); }  // an atomic store
      bool stopped() const override { return agent.stopped_.load(std::memory_order_relaxed); }
      void sent(OutgoingFlow& o, const Action& a, Nanos now) override {
        agent.to_main([ag = &agent, o = &o, a, now] { ag->sent(*o, a, now); });
      }
      void write_failed(OutgoingFlow& o, const std::string& why) override {
        agent.to_main([ag = &agent, o = &o, why] { ag->write_failed(*o, why); });
      }
      void closed(OutgoingFlow& o) override {
        agent.to_main([ag = &agent, o = &o] { ag->closed(*o); });
      }
      // A message that no op waits for yet goes to the ops without ending the
      // main thread's turns early: a stream's receiver then reads in whole
      // turns (16 flows of 8 MiB messages on two I/O threads a side moved 3-6%
      // less when every arrival ended them). By the main thread's last copy of
      // what ops wait for (pump()): an op that began to wait since is served
      // after the turns queued before it.
      void received(OpIndex op, std::uint32_t iteration, Nanos at) override {
        agent.to_main([ag = &agent, op, iteration, at] { ag->received(op, iteration, at); }, awaited(agent.p_.ops[op].flow));
      }
      // As the main thread last copied it (pump()): a flow may gather a read
      // while an op has just begun to wait, until its next look.
      bool awaited(FlowIndex flow) const override { return agent.awaited_[flow].load(std::memory_order_relaxed); }
      void after_events(FlowIndex flow) override {
        agent.to_main([ag = &agent, flow] { ag->after_events(flow); }, awaited(flow));
      }
      void failed(std::string why) override {
        agent.to_main([ag = &agent, why = std::move(why)]() mutable { ag->failed(std::move(why)); });
      }
      void ended(IncomingFlow& in) override {
        agent.to_main([ag = &agent, in = &in] { ag->ended(*in); });
      }
      Agent& agent;
    } relay;
  };

  asio::io_context& io(std::size_t t) { return t == 0 ? ctx_ : workers_[t - 1]->ctx; }
  OutgoingFlow::Events& out_events(std::size_t t) {
    return t == 0 ? static_cast<OutgoingFlow::Events&>(*this) : workers_[t - 1]->relay;
  }
  IncomingFlow::Events& in_events(std::size_t t) {
    return t == 0 ? static_cast<IncomingFlow::Events&>(*this) : workers_[t - 1]->relay;
  }
  // Runs fn on I/O thread t: at once on the main thread (this one), else posted
  // to the worker, after what was posted to it before.
  template <typename F>
  void on_thread(std::size_t t, F&& fn) {
    if (t == 0) {
      fn();
    } else {
      cross_posts_[t]->post(workers_[t - 1]->ctx, std::forward<F>(fn));
    }
  }
  // Posts fn to the main thread from a worker: counted (cross_posts.hpp)
  // unless not `urgent`.
  template <typename F>
  void to_main(F&& fn, bool urgent = true) {
    if (urgent) {
      cross_posts_[0]->post(ctx_, std::forward<F>(fn));
    } else {
      asio::post(ctx_, std::forward<F>(fn));
    }
  }
  void stop_workers() {
    for (auto& w : workers_) w->stop();
  }
  // A socket set up on the main context, moved to thread t's.
  tcp::socket rehome(tcp::socket sock, std::size_t t) {
    if (t == 0) return sock;
    error_code ec;
    const auto protocol = sock.local_endpoint(ec).protocol();
    const int fd = sock.release(ec);
    if (ec) throw std::runtime_error(who() + ": cannot move a socket to I/O thread " + std::to_string(t) + ": " + ec.message());
    return tcp::socket(io(t), protocol, fd);
  }
  void observe_wake(Nanos set, Nanos woke) {
    wake_delay_.observe(set, woke);
    wake_early_.store(wake_delay_.early(), std::memory_order_relaxed);
  }

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
    s.stop = [this, post](std::string why) { post([this, why = std::move(why)] { fail(who() + ": " + why); }); };
    c_.link->attach(std::move(s));
  }

  void start_at(Nanos realtime) {
    if (!error_.empty() || !awaiting_start_) return;
    awaiting_start_ = false;
    begin_at(realtime - realtime_offset_);
  }

  void begin_at(Nanos mono) {
    if (mono > mono_now()) {
      wake_.at(mono, [this](Nanos now) { begin(now); });
    } else {
      begin(mono_now());
    }
  }

  // ---- failure and progress ------------------------------------------------

  void fail(std::string message) {
    if (!error_.empty()) return;
    error_ = std::move(message);
    stopped_.store(true, std::memory_order_relaxed);
    shutdown_all();
  }

  void shutdown_all() {
    error_code ignored;
    signals_.cancel(ignored);
    watchdog_.cancel();
    wake_.cancel();
    compute_timer_.cancel();
    if (acceptor_) acceptor_->close(ignored);
    for (std::size_t i = 0; i < out_.size(); ++i) on_thread(out_thread_[i], [o = out_[i].get()] { o->close(); });
    for (std::size_t i = 0; i < in_.size(); ++i) on_thread(in_thread_[i], [in = in_[i].get()] { in->close(); });
    for (auto* s : pending_) s->close(ignored);
    ctx_.stop();
  }

  void progress() override { last_progress_.store(mono_now(), std::memory_order_relaxed); }

  void watch() {
    watchdog_.expires_after(std::chrono::milliseconds(200));
    watchdog_.async_wait([this](const error_code& ec) {
      if (ec || !error_.empty()) return;
      const Nanos now = mono_now();
      if (!started_ && now > setup_deadline_) {
        fail(who() + ": flows not connected after " + human_duration(c_.connect_timeout) + ": " + unconnected());
        return;
      }
      // The idle clock runs from the start, not from when this agent's flows
      // connected: with many agents on few cores the others took a minute more
      // to connect (and a --start-at may lie beyond --idle-timeout).
      if (begun_ && now - last_progress_.load(std::memory_order_relaxed) > c_.idle_timeout) {
        fail(who() + ": no progress for " + human_duration(c_.idle_timeout) + "; at " +
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
      if (!o->connected() && n++ < 3) {
        const auto& e = c_.roster.ranks.at(p_.flows[o->flow()].dst);
        out += (out.empty() ? "" : ", ") + flow_text(p_, o->flow()) + " to " + e.host + ":" + std::to_string(e.port);
      }
    }
    for (const auto& in : in_) {
      if (!in->connected() && n++ < 3) out += (out.empty() ? "" : ", ") + flow_text(p_, in->flow()) + " not yet dialled in";
    }
    return out;
  }

  // ---- setup -----------------------------------------------------------------

  void open_listener() {
    if (in_.empty()) {
      // Nothing to accept: listen on nothing. A listener handed over (by the
      // controller's link or `replay --local`) would otherwise take connections
      // into its backlog for the whole run, never answered nor closed.
      listen_fd_.reset();
      return;
    }
    if (listen_fd_) {
      acceptor_.emplace(net::adopt_listener(ctx_, std::move(listen_fd_), who()));
    } else {
      const auto& me = c_.roster.ranks.at(rank_);
      acceptor_.emplace(net::open_listener(ctx_, me.host, me.port, who()));
    }
    // Connections accepted start with it (FlowConnector::answer sets it again
    // where this did not take).
    if (!c_.congestion_control.empty()) set_congestion_control(acceptor_->native_handle(), c_.congestion_control);
    spawn(accept_loop());
  }

  // Connections beyond the caps on unauthenticated ones are closed at once; the
  // caps leave room for every flow this rank expects (on one host, all of them
  // come from one address).
  asio::awaitable<void> accept_loop() {
    std::map<std::string, std::size_t> per_host;
    std::size_t most_from_one = 0;
    for (const auto& in : in_) most_from_one = std::max(most_from_one, ++per_host[c_.roster.ranks.at(p_.flows[in->flow()].src).host]);
    const std::size_t total = std::max(net::pending_cap(net::raise_fd_limit(), 2 * (in_.size() + out_.size()) + 32), in_.size() + 4);
    net::Admission admission(total, std::max(total / 4, most_from_one + 2));
    auto on_socket = [this, &admission](tcp::socket sock) {
      auto ticket = net::admit_socket(admission, sock, "a data connection", [this](const std::string& line) { log(line); });
      if (ticket) spawn(handshake_in(std::move(sock), std::move(*ticket)));
    };
    co_await net::accept_connections(*acceptor_, on_socket, [this](const std::string& line) { log(line); });
  }

  asio::awaitable<void> handshake_in(tcp::socket sock, net::Admission::Ticket ticket) {
    const Listed listed(pending_, sock);
    const std::string peer = peer_text(sock);
    const auto flow = co_await connector_.answer(sock, [&ticket] { ticket.release(); });
    ticket.release();
    if (!flow || !error_.empty()) co_return;
    note_congestion(sock);
    const std::size_t t = in_thread_[static_cast<std::size_t>(slot_of_flow_[*flow])];
    IncomingFlow& in = incoming(*flow);
    in.adopt(rehome(std::move(sock), t), peer);
    on_thread(t, [&in] { in.read(); });
    check_connected();
  }

  asio::awaitable<void> connect_flow(OutgoingFlow& o) {
    tcp::socket sock = co_await connector_.dial(o.flow(), steady_at(setup_deadline_), c_.connect_timeout);
    if (!error_.empty()) co_return;
    note_congestion(sock);
    const auto& e = c_.roster.ranks.at(p_.flows[o.flow()].dst);
    TxStampPolicy stamps;
    stamps.on = c_.tx_timestamps;
    stamps.every = c_.tx_stamp_every;
    stamps.sched = stamps.on && (c_.tx_sched == TxSched::on || (c_.tx_sched == TxSched::automatic && egress_can_queue(sock.native_handle())));
    tx_sched_flows_ += stamps.sched ? 1 : 0;
    const std::size_t t = out_thread_[static_cast<std::size_t>(slot_of_flow_[o.flow()])];
    const std::string why = o.attach(rehome(std::move(sock), t), e.host + ":" + std::to_string(e.port), stamps);
    if (!why.empty()) log(flow_text(p_, o.flow()) + ": no transmit timestamps (" + why + ")");
    check_connected();
  }

  // What the summary says of the data sockets' congestion control is read back
  // from them, not taken from the option.
  void note_congestion(tcp::socket& sock) {
    if (auto cc = congestion_control(sock.native_handle())) flow_congestion_.insert(*cc);
  }

  void check_connected() {
    if (started_ || !error_.empty()) return;
    for (const auto& o : out_) {
      if (!o->connected()) return;
    }
    for (const auto& in : in_) {
      if (!in->connected()) return;
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
    begin_at(c_.start_at ? *c_.start_at - realtime_offset_ : mono_now());
  }

  // ---- the run ---------------------------------------------------------------

  void begin(Nanos now) {
    log("connected; starting");
    progress();
    begun_ = true;
    started_at_ = now;
    for (std::size_t i = 0; i < out_.size(); ++i) on_thread(out_thread_[i], [o = out_[i].get()] { o->watch_stamps(); });
    executor_.start(now);
    pump();
  }

  void pump() {
    if (!error_.empty()) return;
    // Before the actions too: a send below can hold this thread for a whole
    // message, while the workers go on by what an op waits for.
    publish_awaited();
    Action a;
    while (executor_.next_action(a)) {
      if (a.kind == Action::Kind::compute) {
        start_compute(a);
      } else if (const int slot = slot_of_flow_[p_.ops[a.op].flow]; out_thread_[static_cast<std::size_t>(slot)] != 0) {
        // The flow's thread sends it, and tells when it was whole in the kernel.
        OutgoingFlow* o = out_[static_cast<std::size_t>(slot)].get();
        on_thread(out_thread_[static_cast<std::size_t>(slot)], [this, o, a] {
          if (const auto sent = o->send(a)) {
            to_main([this, a, at = *sent] {
              executor_.send_done(a.op, a.iteration, at);
              pump();
            });
          }
        });
      } else if (const auto sent = out_[static_cast<std::size_t>(slot)]->send(a)) {
        // Whole in the kernel at once: its dependents may be ready now, in this loop.
        executor_.send_done(a.op, a.iteration, *sent);
      }
    }
    Executor::IterationTimes it;
    while (executor_.pop_completed(it)) iteration_done(it);
    if (const auto w = executor_.next_wake(); w && (!armed_wake_ || *w < *armed_wake_)) {
      armed_wake_ = w;
      // Spinning: woken early by the timer's usual delay, then spinning to the
      // planned time, so a send never goes before it. Not spinning (agents or
      // their threads crowding the cores: a spinning agent takes another's
      // core): set that much early and what was planned for the wake goes when
      // it fires, so sends start as often before their planned time as after.
      const WakePlan plan = plan_wake(*w, c_.spin, wake_delay_);
      wake_.at(plan.set, [this, plan](Nanos now) {
        armed_wake_.reset();
        if (wake_.timed()) observe_wake(plan.set - plan.spin, wake_.woke());
        executor_.tick(std::max(now, plan.planned));
        pump();
      }, plan.spin);
    }
    publish_awaited();
    if (executor_.finished() && !finishing_) start_finishing();
  }

  // Copies which incoming flows an op waits for, for the workers' flows, when
  // it may have changed.
  void publish_awaited() {
    if (workers_.empty() || executor_.awaited_version() == awaited_version_) return;
    awaited_version_ = executor_.awaited_version();
    for (const auto& in : in_) awaited_[in->flow()].store(executor_.awaited(in->flow()), std::memory_order_relaxed);
  }

  void start_compute(const Action& a) {
    const Nanos start = mono_now();
    const Nanos end = pacer_.deadline(a.at, start, a.duration);
    // Spinning: woken early, spin to the end. Not spinning: set early, so that
    // ends fall on the deadline on average.
    const Nanos spin = c_.spin > 0 ? std::max(c_.spin, wake_delay_.early()) : 0;
    const Nanos target = c_.spin > 0 ? end : std::max(start, end - wake_delay_.early());
    compute_timer_.at(target, [this, a, start, set = target - spin](Nanos now) {
      if (compute_timer_.timed()) observe_wake(set, compute_timer_.woke());
      pacer_.ended(now);
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
    }, spin);
  }

  // ---- events of the flows ---------------------------------------------------

  void sent(OutgoingFlow&, const Action& a, Nanos now) override {
    executor_.send_done(a.op, a.iteration, now);
    pump();
  }

  void write_failed(OutgoingFlow& o, const std::string& why) override {
    if (!error_.empty()) return;
    fail(who() + ": " + flow_text(p_, o.flow()) + " to rank " + std::to_string(p_.flows[o.flow()].dst) + " (" + o.peer() +
         "): write failed: " + why);
  }

  void closed(OutgoingFlow&) override {
    if (--closing_ == 0) done();
  }

  bool stopped() const override { return !error_.empty(); }
  void received(OpIndex op, std::uint32_t iteration, Nanos at) override { executor_.received(op, iteration, at); }
  bool awaited(FlowIndex flow) const override { return executor_.awaited(flow); }
  void after_events(FlowIndex) override { pump(); }
  void failed(std::string why) override { fail(std::move(why)); }
  void ended(IncomingFlow&) override { maybe_stop(); }

  // ---- the end ---------------------------------------------------------------

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
      for (const auto& o : out_) link_bytes_.emplace_back(c_.flows.to_global(o->flow()), o->bytes());
      c_.link->iteration(it.iteration, real(it.start), real(it.end), link_bytes_);
    }
    if (!c_.quiet && (it.iteration + 1) % progress_every_ == 0) {
      log("iteration " + std::to_string(it.iteration) + " took " + human_duration(it.end - it.start));
    }
    // TCP_INFO after an iteration, at most every 10 ms (and after the last one).
    const Nanos mono = mono_now();
    if (mono - last_tcp_info_ < kTcpInfoEvery && it.iteration + 1 != iterations_) return;
    last_tcp_info_ = mono;
    for (std::size_t i = 0; i < out_.size(); ++i) {
      on_thread(out_thread_[i], [o = out_[i].get(), at = real(mono)] { o->record_tcp_info(at); });
    }
  }

  void start_finishing() {
    finishing_ = true;
    finished_at_ = mono_now();
    // Everything this rank sends has been handed to the kernel: tell the peers.
    for (std::size_t i = 0; i < out_.size(); ++i) on_thread(out_thread_[i], [o = out_[i].get()] { o->shutdown_send(); });
    maybe_stop();
  }

  void maybe_stop() {
    if (!finishing_) return;
    for (const auto& in : in_) {
      if (!in->ended()) return;
    }
    // Wait for the peers' FINs on our outgoing sockets, so no connection is reset
    // while a peer still reads; the idle watchdog bounds the wait. Once: every
    // incoming flow's end comes here.
    if (finish_sent_) return;
    finish_sent_ = true;
    for (std::size_t i = 0; i < out_.size(); ++i) {
      if (!out_[i]->connected()) continue;
      ++closing_;
      on_thread(out_thread_[i], [o = out_[i].get()] { o->finish(); });
    }
    if (closing_ == 0) done();
  }

  void done() {
    error_code ignored;
    watchdog_.cancel();
    signals_.cancel(ignored);
    ctx_.stop();
  }

  void log(const std::string& msg) const {
    if (!c_.quiet) std::fprintf(stderr, "tensorwire agent %u: %s\n", rank_, msg.c_str());
  }

  void finish_files() {
    const int rec_error = recorder_.stop();
    if (rec_error != 0 && error_.empty()) {
      error_ = who() + ": cannot write results to " + run_dir::records_file(c_.out_dir, rank_) + ": " + std::strerror(rec_error);
    }
    RunSummary s;
    s.rank = rank_;
    s.profile = c_.profile_path;
    s.profile_digest = digest_;
    s.iterations = iterations_;
    s.finished = error_.empty() && executor_.finished();
    s.error = error_;
    s.realtime_minus_monotonic = realtime_offset_;
    s.start = started_at_ ? real(started_at_) : 0;
    s.end = finished_at_ ? real(finished_at_) : 0;
    s.iteration_times = iteration_times_;
    for (const auto& o : out_) {
      s.messages_sent += o->messages();
      s.bytes_sent += o->bytes();
      s.tx_timestamps_lost += o->stamps_lost();
    }
    for (const auto& in : in_) {
      s.messages_received += in->messages();
      s.bytes_received += in->bytes();
      s.looks += in->looks();
      s.looks_skipped += in->looks_skipped();
      s.naps += in->naps();
    }
    s.records_written = recorder_.written();
    s.records_dropped = recorder_.dropped();
    s.max_rss_kib = run_max_rss_kib_;
    s.open_loop = c_.executor.open_loop;
    s.slowdown = c_.executor.slowdown;
    s.spin = c_.spin;
    s.read_gap = c_.read_gap;
    s.read_nap = c_.read_nap;
    s.delay = c_.delay;
    s.tx_timestamps = c_.tx_timestamps;
    s.tx_stamp_every = c_.tx_stamp_every;
    s.tx_sched_flows = tx_sched_flows_;
    s.io_threads = c_.io_threads;
    s.realtime = c_.realtime;
    s.realtime_applied = realtime_applied_;
    s.sched_batch = c_.sched_batch;
    s.sched_batch_applied = sched_batch_applied_;
    // The data sockets' (outgoing ones are the sender's, which decides), or what
    // a socket of this host would use when none connected.
    s.congestion_control = congestion_;
    if (!flow_congestion_.empty()) {
      s.congestion_control.clear();
      for (const auto& cc : flow_congestion_) s.congestion_control += (s.congestion_control.empty() ? "" : ", ") + cc;
    }
    s.pinned_cores = pinned_cores_;
    for (const auto& w : workers_) {
      if (w->cpu >= 0) s.pinned_cores.push_back(w->cpu);
      s.realtime_applied = s.realtime_applied && w->realtime;
      s.sched_batch_applied = s.sched_batch_applied && w->batch;
    }
    try {
      s.write(run_dir::summary_file(c_.out_dir, rank_));
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = who() + ": " + e.what();
    }
  }

  const Profile& p_;
  const AgentConfig& c_;
  RankId rank_;
  Nanos realtime_offset_;
  std::uint64_t digest_;
  UniqueFd listen_fd_;
  // Handshakes in progress. Declared before ctx_ so that it outlives it:
  // ~io_context destroys the frames of suspended handshakes, and each frame's
  // Listed guard erases its socket from here.
  std::vector<tcp::socket*> pending_;
  std::size_t threads_;  // I/O threads: this one and the workers
  // One per I/O thread where there are several; before the contexts, whose
  // handlers still queued when they go refer to them.
  std::vector<std::unique_ptr<CrossPosts>> cross_posts_;
  asio::io_context ctx_{1};
  // Declared before the flows, whose sockets and timers belong to their contexts.
  std::vector<std::unique_ptr<Worker>> workers_;
  Executor executor_;
  std::uint64_t iterations_;
  PreciseTimer wake_;
  PreciseTimer compute_timer_;
  WakeDelay wake_delay_;
  std::atomic<Nanos> wake_early_{0};  // wake_delay_.early(), for the flows' threads
  ComputePacer pacer_;
  asio::steady_timer watchdog_;
  asio::signal_set signals_;
  Recorder recorder_;
  std::string congestion_;  // the data sockets' congestion control (--congestion-control or the host's)
  std::set<std::string> flow_congestion_;  // read back from each data socket once connected
  FlowConnector connector_;
  std::optional<tcp::acceptor> acceptor_;
  std::vector<std::byte> payload_;
  std::vector<std::vector<std::byte>> read_buffers_;  // one per I/O thread, shared by its incoming flows
  std::vector<std::unique_ptr<MachineSpareCores>> spare_cores_;  // one per I/O thread, for its incoming flows
  std::vector<std::unique_ptr<NapGroup>> nap_groups_;  // one per I/O thread, for its incoming flows' naps
  std::vector<CopyCursor> copy_cursors_;               // one per I/O thread, shared by its outgoing flows
  std::vector<std::uint32_t> recv_seen_;
  std::vector<int> slot_of_flow_;
  std::vector<std::unique_ptr<OutgoingFlow>> out_;
  std::vector<std::unique_ptr<IncomingFlow>> in_;
  std::vector<std::size_t> out_thread_, in_thread_;  // the I/O thread of each
  // executor_.awaited() of each flow, for the incoming flows on other I/O
  // threads: copied in pump() when the executor's version of it moves.
  std::unique_ptr<std::atomic<bool>[]> awaited_;
  std::uint64_t awaited_version_ = ~std::uint64_t{0};
  std::vector<std::pair<Nanos, Nanos>> iteration_times_;
  std::optional<Nanos> armed_wake_;
  long run_max_rss_kib_ = 0;
  Nanos last_tcp_info_ = -kSecond;
  Nanos setup_deadline_ = 0;
  std::atomic<Nanos> last_progress_{0};
  std::atomic<bool> stopped_{false};  // the run failed (error_ is set)
  Nanos started_at_ = 0;
  Nanos finished_at_ = 0;
  bool started_ = false;
  bool begun_ = false;  // iteration 0 has begun: the idle clock runs
  bool awaiting_start_ = false;  // connected; the controller has not said when to begin
  bool finishing_ = false;
  bool finish_sent_ = false;  // the outgoing flows were told to finish
  std::shared_ptr<Mailbox> mailbox_;
  std::vector<std::pair<FlowIndex, std::uint64_t>> link_bytes_;
  int closing_ = 0;
  std::uint64_t tx_sched_flows_ = 0;
  bool realtime_applied_ = false;
  bool sched_batch_applied_ = false;
  std::vector<int> pinned_cores_;
  std::uint64_t progress_every_ = 1;
  std::string error_;
};

// The flows a rank drives, in and out.
std::uint64_t flows_driven(const Profile& profile, RankId rank) {
  std::uint64_t flows = 0;
  for (const Flow& f : profile.flows) flows += (f.src == rank ? 1 : 0) + (f.dst == rank ? 1 : 0);
  return flows;
}

// Every flow of the rank is a socket, every I/O thread a reactor (epoll, its
// timer and its wake-up descriptors); the listener, the control link, the
// output files and the standard streams fit in the reserve. Raised to what the hard limit allows; beyond it, a clear error
// before the first connection rather than refused accepts halfway through.
void check_descriptors(const Profile& profile, RankId rank, std::uint32_t io_threads) {
  constexpr std::uint64_t kReserve = 64;
  constexpr std::uint64_t kPerThread = 3;
  const std::uint64_t flows = flows_driven(profile, rank);
  const std::uint64_t need = flows + kReserve + kPerThread * std::max<std::uint32_t>(1, io_threads);
  const std::uint64_t limit = net::raise_fd_limit(std::max<std::uint64_t>(65536, need));
  if (limit < need) {
    throw std::runtime_error("rank " + std::to_string(rank) + " drives " + std::to_string(flows) + " flows and needs about " +
                             std::to_string(need) + " file descriptors, but may open only " + std::to_string(limit) +
                             " (raise the hard limit: ulimit -Hn, LimitNOFILE=)");
  }
}

}  // namespace

void run_agent(const Profile& profile, AgentConfig& config) {
  if (config.rank >= profile.ranks.size()) {
    throw std::runtime_error("rank " + std::to_string(config.rank) + " is not in the profile (" +
                             std::to_string(profile.ranks.size()) + " ranks)");
  }
  if (config.roster.ranks.size() != profile.ranks.size()) {
    throw std::runtime_error("the roster lists " + std::to_string(config.roster.ranks.size()) + " ranks, the profile has " +
                             std::to_string(profile.ranks.size()));
  }
  if (!config.ops.identity() && config.ops.global().size() != profile.ops.size()) {
    throw std::runtime_error("the profile slice has " + std::to_string(profile.ops.size()) + " ops, its index map " +
                             std::to_string(config.ops.global().size()));
  }
  if (!config.flows.identity() && config.flows.global().size() != profile.flows.size()) {
    throw std::runtime_error("the profile slice has " + std::to_string(profile.flows.size()) + " flows, its index map " +
                             std::to_string(config.flows.global().size()));
  }
  if (config.machine_agents == 0) config.machine_agents = static_cast<std::uint32_t>(ranks_on_host(config.roster, config.rank));
  if (config.io_threads == 0) {
    const std::uint64_t sharing = config.machine_agents;
    const std::uint64_t flows = flows_driven(profile, config.rank), cores = tw::usable_cores();
    config.io_threads = automatic_io_threads(flows, cores, sharing);
    if (!config.quiet) {
      std::fprintf(stderr, "tensorwire agent %u: %u I/O thread%s (%llu flows; %llu cores, %llu agent%s on this machine)\n", config.rank,
                   config.io_threads, config.io_threads == 1 ? "" : "s", static_cast<unsigned long long>(flows),
                   static_cast<unsigned long long>(cores), static_cast<unsigned long long>(sharing), sharing == 1 ? "" : "s");
    }
  }
  check_descriptors(profile, config.rank, config.io_threads);
  UniqueFd listen_fd = std::move(config.listen_fd);
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) throw std::runtime_error(config.out_dir + ": cannot create: " + ec.message());
  // Wake-ups as close to the deadline as the kernel allows.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  // Before anything connects: a choice this host cannot make fails here, once.
  std::string congestion;
  try {
    congestion = probe_congestion_control(config.congestion_control);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(config.rank) + ": " + e.what());
  }
  Agent agent(profile, config, std::move(listen_fd), std::move(congestion));
  agent.run();
}

}  // namespace tw

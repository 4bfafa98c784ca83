// The Agent wires the data plane together and owns the run's life cycle: the
// listener and the flows' handshakes (FlowConnector), the flows (OutgoingFlow,
// IncomingFlow), the executor driven by precise timers, the watchdog, the
// recorder and the summary. Threads: one Asio io_context thread runs all of it;
// the recorder has its own thread; AgentSteering is called from the link's thread
// and posts into the context. Setup is written as coroutines (each started with
// net::spawn_task, so its failure ends the run); the per-message hot path as
// callbacks on long-lived per-flow state, so that no message allocates.
#include "tensorwire/agent/agent.hpp"

#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "clock.hpp"
#include "compute_pacer.hpp"
#include "flow_connector.hpp"
#include "incoming_flow.hpp"
#include "outgoing_flow.hpp"
#include "precise_timer.hpp"
#include "recorder.hpp"
#include "run_summary.hpp"
#include "tensorwire/core/frame.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/net/accept_loop.hpp"
#include "tensorwire/net/admission.hpp"
#include "tensorwire/net/listener.hpp"
#include "tensorwire/net/task.hpp"

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
  Agent(const Profile& p, const AgentConfig& c, UniqueFd listen_fd)
      : p_(p),
        c_(c),
        rank_(c.rank),
        realtime_offset_(clock_ns(CLOCK_REALTIME) - mono_now()),
        digest_(frame::profile_digest(p)),
        listen_fd_(std::move(listen_fd)),
        executor_(p, c.rank, c.executor),
        iterations_(executor_.iterations()),
        wake_(ctx_, c.spin),
        compute_timer_(ctx_, c.spin),
        watchdog_(ctx_),
        signals_(ctx_, SIGINT, SIGTERM),
        recorder_(run_dir::records_file(c.out_dir, c.rank)),
        connector_(p, c.roster, c.rank, digest_, [this](const std::string& m) { log(m); }) {
    recv_seen_.assign(p_.ops.size(), 0);
    slot_of_flow_.assign(p_.flows.size(), -1);
    Bytes largest = frame::kHeaderSize;
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.rank == rank_) largest = std::max(largest, frame::wire_bytes(op.bytes));
    }
    payload_.assign(static_cast<std::size_t>(std::min<Bytes>(largest, kMaxChunk)), std::byte{0});
    std::size_t inbound = 0;
    for (const Flow& f : p_.flows) inbound += f.dst == rank_ ? 1 : 0;
    std::vector<char> prioritised(p_.flows.size(), 0);
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.priority != 0) prioritised[op.flow] = 1;
    }
    for (std::size_t f = 0; f < p_.flows.size(); ++f) {
      const auto flow = static_cast<FlowIndex>(f);
      if (p_.flows[f].src == rank_) {
        slot_of_flow_[f] = static_cast<int>(out_.size());
        out_.push_back(std::make_unique<OutgoingFlow>(ctx_, p_, flow, rank_, payload_, recorder_,
                                                      static_cast<OutgoingFlow::Events&>(*this), realtime_offset_,
                                                      prioritised[f] != 0));
      } else if (p_.flows[f].dst == rank_) {
        slot_of_flow_[f] = static_cast<int>(in_.size());
        const RankId src = p_.flows[f].src;
        IncomingFlow::Settings s;
        s.delay = c.delay + (src < c.delay_from.size() ? c.delay_from[src] : 0);
        s.read_lag = p_.flows[f].read_lag;
        s.wake = &wake_delay_;
        s.spin = c.spin;
        s.read_buffer = read_buffer_size(flow, inbound);
        s.iterations = iterations_;
        s.realtime_offset = realtime_offset_;
        in_.push_back(std::make_unique<IncomingFlow>(ctx_, p_, flow, rank_, s, recv_seen_, recorder_,
                                                     static_cast<IncomingFlow::Events&>(*this)));
      }
    }
    progress_every_ = std::max<std::uint64_t>(1, iterations_ / 10);
  }

  ~Agent() override {
    if (mailbox_) {
      std::lock_guard lock(mailbox_->mutex);
      mailbox_->ctx = nullptr;
    }
  }

  void run() {
    if (c_.link) attach_link();
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (!ec) fail(who() + ": interrupted by signal " + std::to_string(sig));
    });
    setup_deadline_ = mono_now() + c_.connect_timeout;
    last_progress_ = mono_now();
    watch();
    open_listener();
    for (auto& o : out_) spawn(connect_flow(*o));
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

  std::string who() const { return "rank " + std::to_string(rank_); }
  Nanos real(Nanos mono) const { return mono + realtime_offset_; }
  OutgoingFlow& outgoing(FlowIndex f) { return *out_[static_cast<std::size_t>(slot_of_flow_[f])]; }
  IncomingFlow& incoming(FlowIndex f) { return *in_[static_cast<std::size_t>(slot_of_flow_[f])]; }

  void spawn(asio::awaitable<void> task) {
    net::spawn_task(ctx_, std::move(task), [this](const std::string& what) { fail(what); });
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
    shutdown_all();
  }

  void shutdown_all() {
    error_code ignored;
    signals_.cancel(ignored);
    watchdog_.cancel();
    wake_.cancel();
    compute_timer_.cancel();
    if (acceptor_) acceptor_->close(ignored);
    for (auto& o : out_) o->close();
    for (auto& in : in_) in->close();
    for (auto* s : pending_) s->close(ignored);
    ctx_.stop();
  }

  void progress() override { last_progress_ = mono_now(); }

  void watch() {
    watchdog_.expires_after(std::chrono::milliseconds(200));
    watchdog_.async_wait([this](const error_code& ec) {
      if (ec || !error_.empty()) return;
      const Nanos now = mono_now();
      if (!started_ && now > setup_deadline_) {
        fail(who() + ": flows not connected after " + human_duration(c_.connect_timeout) + ": " + unconnected());
        return;
      }
      if (started_ && !awaiting_start_ && now - last_progress_ > c_.idle_timeout) {
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
    if (in_.empty()) return;  // nothing to accept: listen on nothing (an inherited socket closes with listen_fd_)
    if (listen_fd_) {
      acceptor_.emplace(net::adopt_listener(ctx_, std::move(listen_fd_), who()));
    } else {
      const auto& me = c_.roster.ranks.at(rank_);
      acceptor_.emplace(net::open_listener(ctx_, me.host, me.port, who()));
    }
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
    const auto flow = co_await connector_.answer(sock, [this](FlowIndex f) { return incoming(f).connected(); });
    ticket.release();
    if (!flow || !error_.empty()) co_return;
    incoming(*flow).start(std::move(sock), peer);
    check_connected();
  }

  std::size_t read_buffer_size(FlowIndex flow, std::size_t inbound) const {
    Bytes largest = 0;
    for (const Op& op : p_.ops) {
      if (op.type == OpType::send && op.flow == flow) largest = std::max(largest, frame::wire_bytes(op.bytes));
    }
    const std::size_t budget = std::max(kMinReadBuffer, kReadBudget / std::max<std::size_t>(inbound, 1));
    return std::clamp(static_cast<std::size_t>(std::min<Bytes>(largest, kMaxReadBuffer)), kMinReadBuffer,
                      std::min(kMaxReadBuffer, budget));
  }

  asio::awaitable<void> connect_flow(OutgoingFlow& o) {
    tcp::socket sock = co_await connector_.dial(o.flow(), steady_at(setup_deadline_), c_.connect_timeout);
    if (!error_.empty()) co_return;
    const auto& e = c_.roster.ranks.at(p_.flows[o.flow()].dst);
    const std::string why = o.attach(std::move(sock), e.host + ":" + std::to_string(e.port), c_.tx_timestamps);
    if (!why.empty()) log(flow_text(p_, o.flow()) + ": no transmit timestamps (" + why + ")");
    check_connected();
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
    started_at_ = now;
    for (auto& o : out_) o->watch_stamps();
    executor_.start(now);
    pump();
  }

  void pump() {
    if (!error_.empty()) return;
    Action a;
    while (executor_.next_action(a)) {
      if (a.kind == Action::Kind::compute) {
        start_compute(a);
      } else {
        outgoing(p_.ops[a.op].flow).send(a);
      }
    }
    Executor::IterationTimes it;
    while (executor_.pop_completed(it)) iteration_done(it);
    if (const auto w = executor_.next_wake(); w && (!armed_wake_ || *w < *armed_wake_)) {
      armed_wake_ = w;
      // Spinning: woken early by the timer's usual delay, then spinning to the
      // planned time, so a send never goes before it. Not spinning (more agents
      // than cores: a spinning agent takes another's core): set that much early
      // and what was planned for the wake goes when it fires, so sends start as
      // often before their planned time as after.
      const WakePlan plan = plan_wake(*w, c_.spin, wake_delay_);
      wake_.at(plan.set, [this, plan](Nanos now) {
        armed_wake_.reset();
        if (wake_.timed()) wake_delay_.observe(plan.set - plan.spin, wake_.woke());
        executor_.tick(std::max(now, plan.planned));
        pump();
      }, plan.spin);
    }
    if (executor_.finished() && !finishing_) start_finishing();
  }

  void start_compute(const Action& a) {
    const Nanos start = mono_now();
    const Nanos end = pacer_.deadline(a.at, start, a.duration);
    // Spinning: woken early, spin to the end. Not spinning: set early, so that
    // ends fall on the deadline on average.
    const Nanos spin = c_.spin > 0 ? std::max(c_.spin, wake_delay_.early()) : 0;
    const Nanos target = c_.spin > 0 ? end : std::max(start, end - wake_delay_.early());
    compute_timer_.at(target, [this, a, start, set = target - spin](Nanos now) {
      if (compute_timer_.timed()) wake_delay_.observe(set, compute_timer_.woke());
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
  void after_events() override { pump(); }
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
      for (const auto& o : out_) link_bytes_.emplace_back(o->flow(), o->bytes());
      c_.link->iteration(it.iteration, real(it.start), real(it.end), link_bytes_);
    }
    if (!c_.quiet && (it.iteration + 1) % progress_every_ == 0) {
      log("iteration " + std::to_string(it.iteration) + " took " + human_duration(it.end - it.start));
    }
    // TCP_INFO after an iteration, at most every 10 ms (and after the last one).
    const Nanos mono = mono_now();
    if (mono - last_tcp_info_ < kTcpInfoEvery && it.iteration + 1 != iterations_) return;
    last_tcp_info_ = mono;
    for (const auto& o : out_) o->record_tcp_info(real(mono));
  }

  void start_finishing() {
    finishing_ = true;
    finished_at_ = mono_now();
    // Everything this rank sends has been handed to the kernel: tell the peers.
    for (auto& o : out_) o->shutdown_send();
    maybe_stop();
  }

  void maybe_stop() {
    if (!finishing_) return;
    for (const auto& in : in_) {
      if (!in->ended()) return;
    }
    // Wait for the peers' FINs on our outgoing sockets, so no connection is reset
    // while a peer still reads; the idle watchdog bounds the wait.
    for (auto& o : out_) {
      if (!o->connected()) continue;
      ++closing_;
      o->finish();
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
    }
    s.records_written = recorder_.written();
    s.records_dropped = recorder_.dropped();
    s.max_rss_kib = run_max_rss_kib_;
    s.open_loop = c_.executor.open_loop;
    s.slowdown = c_.executor.slowdown;
    s.spin = c_.spin;
    s.delay = c_.delay;
    s.tx_timestamps = c_.tx_timestamps;
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
  asio::io_context ctx_{1};
  Executor executor_;
  std::uint64_t iterations_;
  PreciseTimer wake_;
  PreciseTimer compute_timer_;
  WakeDelay wake_delay_;
  ComputePacer pacer_;
  asio::steady_timer watchdog_;
  asio::signal_set signals_;
  Recorder recorder_;
  FlowConnector connector_;
  std::optional<tcp::acceptor> acceptor_;
  std::vector<std::byte> payload_;
  std::vector<std::uint32_t> recv_seen_;
  std::vector<int> slot_of_flow_;
  std::vector<std::unique_ptr<OutgoingFlow>> out_;
  std::vector<std::unique_ptr<IncomingFlow>> in_;
  std::vector<std::pair<Nanos, Nanos>> iteration_times_;
  std::optional<Nanos> armed_wake_;
  long run_max_rss_kib_ = 0;
  Nanos last_tcp_info_ = -kSecond;
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
  std::string error_;
};

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
  UniqueFd listen_fd = std::move(config.listen_fd);
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) throw std::runtime_error(config.out_dir + ": cannot create: " + ec.message());
  // Wake-ups as close to the deadline as the kernel allows.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  Agent agent(profile, config, std::move(listen_fd));
  agent.run();
}

}  // namespace tw

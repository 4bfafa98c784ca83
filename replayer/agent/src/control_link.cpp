#include "tensorwire/agent/control_link.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "tensorwire/agent/agent.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_slice.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/net/control_stream.hpp"
#include "tensorwire/net/listener.hpp"
#include "tensorwire/net/outbox.hpp"
#include "tensorwire/net/retry.hpp"
#include "tensorwire/net/task.hpp"
#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/util/host_port.hpp"
#include "tensorwire/util/realtime.hpp"
#include "tensorwire/util/temp_dir.hpp"
#include "tensorwire/util/unique_fd.hpp"

namespace tw {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Ws = websocket::stream<net::ControlStream>;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

class ControlLink final : public AgentLink {
 public:
  explicit ControlLink(const AgentClientOptions& o)
      : o_(o),
        tls_(o.controller_ca.empty() ? nullptr : net::tls_client_context(o.controller_ca)),
        ws_(std::in_place, net::ControlStream(beast::tcp_stream(ctx_), tls_.get())),
        outbox_(*ws_),
        flush_(ctx_),
        signals_(ctx_, SIGINT, SIGTERM) {}

  ~ControlLink() override {
    stop_agent("the control client is ending");
    if (agent_thread_.joinable()) agent_thread_.join();
    if (remove_out_dir_ && !out_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(out_dir_, ignored);
    }
  }

  int run() {
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (ec) return;
      interrupted_ = true;
      give_up("interrupted by signal " + std::to_string(sig));
    });
    if (o_.watch_stdin) watch_stdin();
    net::spawn_task(ctx_, session(), [this](const std::string& why) { give_up(why); });
    ctx_.run();
    // The control connection is gone; an agent that still runs must stop now.
    stop_agent(error_.empty() ? "the control connection closed" : error_);
    if (agent_thread_.joinable()) agent_thread_.join();
    if (!error_.empty()) {
      std::fprintf(stderr, "tensorwire agent: %s\n", error_.c_str());
      return interrupted_ ? 130 : 1;
    }
    return agent_ok_ ? 0 : 1;
  }

  // ---- AgentLink: called on the agent's thread --------------------------------

  void attach(AgentSteering steering) override {
    std::lock_guard lock(mutex_);
    steering_ = std::move(steering);
    // A stop that came while the agent was still reading its slice.
    if (stop_early_ && steering_.stop) steering_.stop(*stop_early_);
  }

  void connected() override {
    asio::post(ctx_, [this] { send(control::Connected{}); });
  }

  void iteration(std::uint32_t index, Nanos start, Nanos end,
                 const std::vector<std::pair<FlowIndex, std::uint64_t>>& flow_bytes) override {
    std::lock_guard lock(mutex_);
    batch_.push_back({index, start, end});
    flow_bytes_ = flow_bytes;
  }

 private:
  void log(const std::string& m) const {
    if (!o_.quiet) std::fprintf(stderr, "tensorwire agent: %s\n", m.c_str());
  }

  // Ends the session with an error: stops the agent (which then reports), or,
  // before it runs, closes the connection.
  void give_up(const std::string& why) {
    if (error_.empty()) error_ = why;
    if (agent_running_) {
      stop_agent(why);
      return;
    }
    shutdown();
  }

  void shutdown() {
    error_code ignored;
    signals_.cancel(ignored);
    flush_.cancel();
    outbox_.close();
    if (stdin_) stdin_->close(ignored);
    beast::get_lowest_layer(*ws_).socket().close(ignored);
    ctx_.stop();
  }

  void stop_agent(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (steering_.stop) steering_.stop(why);
    else if (!stop_early_) stop_early_ = why;
  }

  void watch_stdin() {
    if (!stdin_) {
      const int fd = ::dup(0);
      if (fd < 0) return;
      stdin_.emplace(ctx_, fd);
    }
    stdin_->async_read_some(asio::buffer(stdin_buf_), [this](const error_code& ec, std::size_t) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {  // more input than the token: ignored, keep watching for the end
        watch_stdin();
        return;
      }
      give_up("the launcher went away (stdin closed)");
    });
  }

  void send(const AgentMessage& m) { outbox_.push_text(encode(m)); }

  // ---- the session --------------------------------------------------------------

  asio::awaitable<void> session() {
    const auto [host, port] = split_host_port(o_.controller, "--controller");
    co_await connect(host, port);
    open_data_listener();
    net::spawn_task(ctx_, write_loop(), [this](const std::string& why) { give_up(why); });
    control::Hello hello;
    hello.host = o_.host_name.empty() ? host_name() : o_.host_name;
    hello.pid = ::getpid();
    hello.data_host = data_host_;
    hello.data_port = data_port_;
    hello.rank_hint = o_.rank_hint;
    send(hello);
    beast::flat_buffer buf;
    for (;;) {
      auto [ec, n] = co_await ws_->async_read(buf, kTuple);
      if (ec) {
        if (!bye_) give_up("lost the controller at " + o_.controller + ": " + (outbox_.overflowed() ? outbox_.overflow_text() : ec.message()));
        else shutdown();
        co_return;
      }
      if (!ws_->got_text()) {
        give_up("the controller sent an unexpected binary frame");
        co_return;
      }
      const Nanos received = realtime_ns();
      const auto decoded = decode_controller_message(beast::buffers_to_string(buf.data()));
      buf.consume(buf.size());
      if (!decoded) {
        give_up("the controller sent " + decoded.error);
        co_return;
      }
      bool go_on = true;
      std::visit([&](const auto& m) { go_on = handle(m, received); }, *decoded.message);
      if (bye_) {
        co_await ws_->async_close(websocket::close_code::normal, kTuple);
        shutdown();
        co_return;
      }
      if (!go_on) co_return;
    }
  }

  // Each returns false when the session ends.
  bool handle(const control::Ping& m, Nanos received) {
    send(control::Pong{m.seq, received});
    return true;
  }
  bool handle(const control::Setup& m, Nanos) {
    setup(m);
    return true;
  }
  bool handle(const control::Start& m, Nanos) {
    std::lock_guard lock(mutex_);
    if (steering_.start) steering_.start(m.at);
    return true;
  }
  bool handle(const control::Stop& m, Nanos) {
    const std::string why = "stopped by the controller: " + m.reason;
    if (agent_running_) {
      stop_agent(why);
      return true;
    }
    give_up(why);
    return false;
  }
  bool handle(const control::Bye&, Nanos) {
    bye_ = true;
    return false;
  }

  asio::awaitable<void> connect(const std::string& host, std::uint16_t port) {
    std::string last = "no attempt";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(o_.join_timeout);
    const auto connected = co_await net::retry_until<bool>(deadline, [&] { return try_connect(host, port, last); });
    if (!connected) {
      throw std::runtime_error("cannot reach the controller at " + o_.controller + " within " +
                               human_duration(o_.join_timeout) + " (" + last + ")");
    }
  }

  // One attempt: resolve, connect, WebSocket handshake with the token. A refused
  // token ends the trying (it will not get better); anything else is tried again.
  asio::awaitable<std::optional<bool>> try_connect(const std::string& host, std::uint16_t port, std::string& last) {
    tcp::resolver resolver(ctx_);
    auto [rec, results] = co_await resolver.async_resolve(host, std::to_string(port), kTuple);
    if (rec) {
      last = rec.message();
      co_return std::nullopt;
    }
    // A fresh WebSocket (it keeps a failure it has reported), socket and TLS
    // session for each attempt. outbox_ refers to *ws_, replaced in place.
    ws_.emplace(net::ControlStream(beast::tcp_stream(ctx_), tls_.get()));
    auto& stream = ws_->next_layer();
    stream.expires_after(std::chrono::seconds(2));
    auto [cec, ep] = co_await stream.async_connect(results, kTuple);
    if (cec) {
      last = cec.message();
      co_return std::nullopt;
    }
    if (stream.tls()) {
      // A certificate that does not verify, or a controller that does not speak
      // TLS, will not change: that ends the trying; a broken connection does not.
      net::set_peer_name(stream, host);
      stream.expires_after(std::chrono::seconds(5));
      if (auto [tec] = co_await stream.async_handshake(asio::ssl::stream_base::client, kTuple); tec) {
        const std::string why = "TLS handshake with the controller at " + o_.controller + " failed: " + net::tls_error_text(stream, tec);
        if (tec.category() == asio::error::get_ssl_category() && tec != asio::ssl::error::stream_truncated) throw std::runtime_error(why);
        // Closed mid-handshake: a plain controller's HTTP parser, or a cap on
        // connections under a flood; the second passes, the first does not.
        last = why + (tec == asio::ssl::error::stream_truncated || tec == asio::error::eof || tec == asio::error::connection_reset
                          ? " (a controller run without --tls-cert does not speak TLS)"
                          : "");
        co_return std::nullopt;
      }
    }
    stream.expires_never();
    // The handshake gets 5 s, stretched as the heartbeat is: with 256 agents
    // starting on 2 cores, a 5 s handshake expired while the controller's answer
    // was on its way, and every retry added to the crowd.
    const auto handshake = std::max<Nanos>(5 * kSecond, static_cast<Nanos>(5e9 * static_cast<double>(o_.heartbeat) / kHeartbeatTimeout));
    ws_->set_option(websocket::stream_base::timeout{std::chrono::nanoseconds(handshake), std::chrono::nanoseconds(o_.heartbeat), true});
    ws_->set_option(websocket::stream_base::decorator([token = o_.token](websocket::request_type& req) {
      req.set(http::field::authorization, "Bearer " + token);
      req.set(http::field::user_agent, "tensorwire-agent");
    }));
    ws_->read_message_max(kMaxControllerMessage);
    websocket::response_type res;
    const std::string authority = host + ":" + std::to_string(port);
    const std::string path = kAgentPath;
    auto [hec] = co_await ws_->async_handshake(res, authority, path, kTuple);
    if (!hec) co_return true;
    if (res.result() == http::status::unauthorized) {
      throw std::runtime_error("the controller at " + o_.controller + " refused the token");
    }
    // A TLS controller closes a plain handshake without a reply; so does one that
    // closed the connection to make room for a newer one (a flood of strangers:
    // its log says so), and the agent retries.
    const bool closed = hec == beast::http::error::end_of_stream || hec == asio::error::connection_reset || hec == asio::error::eof;
    last = "handshake: " + hec.message() +
           (closed ? std::string(" (closed by the controller: ") + (stream.tls() ? "" : "a controller run with --tls-cert needs --controller-ca, or ") +
                         "it was flooded with connections; its log says which)"
                   : std::string());
    co_return std::nullopt;
  }

  // The data listener: on the address that reaches the controller (so peers on
  // the same network reach it too) unless told otherwise, on a port of the
  // kernel's choosing. Handed to the agent as an inherited socket.
  void open_data_listener() {
    std::string host = o_.data_host;
    std::uint16_t port = 0;
    if (host.find(':') != std::string::npos && host.find(']') == std::string::npos && host.find("::") == std::string::npos) {
      std::tie(host, port) = split_host_port(host, "--data-host");
    }
    if (host.empty()) host = beast::get_lowest_layer(*ws_).socket().local_endpoint().address().to_string();
    tcp::acceptor a = net::open_listener(ctx_, host, port, "data flows");
    data_host_ = host;
    data_port_ = a.local_endpoint().port();
    listen_fd_ = UniqueFd(a.release());
  }

  // The slice is parsed on the agent's thread, not here: with many agents on
  // few cores, a parse on the link's thread held back its replies to the
  // controller's pings past the heartbeat timeout (256 agents on 2 cores).
  void setup(const control::Setup& m) {
    if (agent_running_) throw std::runtime_error("the controller sent a second setup");
    rank_ = m.rank;
    run_id_ = m.run;
    if (o_.out_dir.empty()) {
      // Named with the pid, so that the next agent removes it if this one is
      // killed before it can (SIGKILL, a lost host).
      remove_stale_temp_dirs(temp_parent(), "tensorwire-agent");
      std::string tmpl = (std::filesystem::path(temp_parent()) / ("tensorwire-agent-" + std::to_string(::getpid()) + "-XXXXXX")).string();
      if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a directory for results in " + tmpl);
      out_dir_ = tmpl;
      remove_out_dir_ = true;
    } else {
      out_dir_ = o_.out_dir;
    }
    config_.rank = rank_;
    config_.profile_path = "run " + run_id_;
    config_.profile_digest = m.profile_digest;
    config_.out_dir = out_dir_;
    config_.executor = executor_options_for(m.settings, m.slowdown);
    config_.spin = m.settings.spin;
    config_.read_gap = m.settings.read_gap;
    config_.read_nap = m.settings.read_nap;
    config_.delay = m.settings.delay;
    config_.connect_timeout = m.settings.connect_timeout;
    config_.idle_timeout = m.settings.idle_timeout;
    // The listening socket's hand-over to the agent, which owns it from here.
    config_.listen_fd = std::move(listen_fd_);
    config_.tx_timestamps = m.settings.tx_timestamps;
    config_.tx_stamp_every = m.settings.tx_stamp_every;
    config_.tx_sched = m.settings.tx_sched;
    config_.io_threads = m.settings.io_threads;
    config_.machine_agents = m.settings.machine_agents;
    config_.pin = m.settings.pin;
    config_.realtime = m.settings.realtime;
    config_.sched_batch = m.settings.sched_batch;
    config_.congestion_control = m.settings.congestion_control;
    config_.quiet = o_.quiet;
    config_.link = this;
    agent_running_ = true;
    agent_thread_ = std::thread([this, m] {
      std::string error;
      try {
        load_slice(m);
        std::optional<std::string> stopped;
        {
          std::lock_guard lock(mutex_);
          stopped = stop_early_;
        }
        if (stopped) throw std::runtime_error(*stopped);
        run_agent(profile_, config_);
      } catch (const std::exception& e) {
        error = e.what();
      }
      asio::post(ctx_, [this, error] { agent_finished(error); });
    });
    flush_progress();
  }

  // On the agent's thread, before the agent: profile_, config_.ops and .flows,
  // and the roster and delays, by rank, of the ranks the slice's flows reach.
  void load_slice(const control::Setup& m) {
    ProfileLoad load = load_profile_text(m.profile, "profile of run " + run_id_);
    if (!load.ok()) {
      throw std::runtime_error("the controller's profile does not load: " +
                               (load.diagnostics.empty() ? std::string("?") : load.diagnostics.front().str()));
    }
    profile_ = std::move(*load.profile);
    std::string why;
    auto ops = indices_from_runs(m.ops, profile_.ops.size(), m.profile_ops, why);
    if (!ops) throw std::runtime_error("the controller's profile slice does not fit its op indices: " + why);
    config_.ops = IndexMap(std::move(*ops));
    auto flows = indices_from_runs(m.flows, profile_.flows.size(), m.profile_flows, why);
    if (!flows) throw std::runtime_error("the controller's profile slice does not fit its flow indices: " + why);
    config_.flows = IndexMap(std::move(*flows));
    const std::size_t ranks = profile_.ranks.size();
    config_.roster = roster_by_rank(m.roster, profile_, rank_, m.data_token);
    config_.delay_from.clear();
    for (const auto& [src, ns] : m.delay_from) {
      if (src >= ranks || ns < 0) {
        throw std::runtime_error("the controller's delay from rank " + std::to_string(src) + " is out of range");
      }
      if (config_.delay_from.size() <= src) config_.delay_from.resize(src + 1, 0);
      config_.delay_from[src] = ns;
    }
  }

  void flush_progress() {
    flush_.expires_after(std::chrono::milliseconds(100));
    flush_.async_wait([this](const error_code& ec) {
      if (ec) return;
      send_progress();
      if (agent_running_) flush_progress();
    });
  }

  void send_progress() {
    control::Progress p;
    std::vector<std::pair<FlowIndex, std::uint64_t>> flows;
    {
      std::lock_guard lock(mutex_);
      p.iterations.swap(batch_);
      flows = flow_bytes_;
    }
    if (p.iterations.empty()) return;
    for (const auto& [f, bytes] : flows) p.flows.push_back({f, bytes});
    send(p);
  }

  void agent_finished(const std::string& error) {
    agent_running_ = false;
    agent_ok_ = error.empty();
    flush_.cancel();
    send_progress();
    if (!error_.empty() && beast::get_lowest_layer(*ws_).socket().is_open() == false) {
      shutdown();
      return;
    }
    if (!error.empty() && error_.empty()) log(error);
    send(control::Done{error.empty(), error});
    for (const std::string& path : {run_dir::summary_file(out_dir_, rank_), run_dir::records_file(out_dir_, rank_)}) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(path, ec);
      if (ec) continue;  // not written (the run failed early)
      send(control::FileBegin{std::filesystem::path(path).filename().string(), size});
      outbox_.push_file(path);
    }
    send(control::Uploaded{});
    if (!error_.empty() && !bye_) {
      // Lost the controller: nobody to upload to.
      shutdown();
    }
  }

  asio::awaitable<void> write_loop() {
    if (const auto problem = co_await outbox_.run()) give_up(*problem);
  }

  const AgentClientOptions& o_;
  asio::io_context ctx_{1};
  std::unique_ptr<asio::ssl::context> tls_;  // null: plain TCP
  std::optional<Ws> ws_;  // always engaged
  net::Outbox<Ws> outbox_;
  asio::steady_timer flush_;
  asio::signal_set signals_;
  std::optional<asio::posix::stream_descriptor> stdin_;
  std::array<char, 64> stdin_buf_{};
  std::string data_host_;
  std::uint16_t data_port_ = 0;
  UniqueFd listen_fd_;
  RankId rank_ = 0;
  std::string run_id_;
  Profile profile_;
  AgentConfig config_;
  std::string out_dir_;
  bool remove_out_dir_ = false;
  std::thread agent_thread_;
  bool agent_running_ = false;
  bool agent_ok_ = false;
  bool bye_ = false;
  bool interrupted_ = false;
  std::string error_;
  std::mutex mutex_;  // guards steering_, stop_early_, batch_, flow_bytes_ (shared with the agent's thread)
  AgentSteering steering_;
  std::optional<std::string> stop_early_;  // a stop before the agent attached
  std::vector<control::IterationSpan> batch_;
  std::vector<std::pair<FlowIndex, std::uint64_t>> flow_bytes_;
};

}  // namespace

int run_controlled_agent(const AgentClientOptions& options) {
  if (options.token.empty()) throw std::invalid_argument("an agent needs the run's token (--token, --token-stdin or TW_TOKEN)");
  ControlLink link(options);
  return link.run();
}

}  // namespace tw

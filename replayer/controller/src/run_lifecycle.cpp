// One run at the controller (run_controller, controller.hpp), from launch to the
// run directory: the phases (wait for agents, setup, connect, sync, start, run,
// collect), the failure that ends a run and who is named for it, and the wiring
// of the HTTP router, the sessions, clock sync, the result collectors, the run
// status and the progress line. Everything runs on one io_context on the thread
// that calls run_controller.
#include <algorithm>
#include <optional>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <filesystem>
#include <map>

#include "tensorwire/controller/agent_session.hpp"
#include "tensorwire/controller/clock_sync_round.hpp"
#include "tensorwire/controller/controller.hpp"
#include "tensorwire/controller/http_router.hpp"
#include "tensorwire/controller/notifier.hpp"
#include "tensorwire/controller/progress_line.hpp"
#include "tensorwire/controller/rank_assignment.hpp"
#include "tensorwire/controller/run_progress.hpp"
#include "tensorwire/controller/run_status.hpp"
#include "tensorwire/core/frame.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_slice.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/net/accept_loop.hpp"
#include "tensorwire/net/admission.hpp"
#include "tensorwire/net/control_stream.hpp"
#include "tensorwire/net/listener.hpp"
#include "tensorwire/net/task.hpp"
#include "tensorwire/util/host_port.hpp"
#include "tensorwire/util/realtime.hpp"
#include "tensorwire/util/token.hpp"
#include "tensorwire/view/web_pages.hpp"

namespace tw {
namespace {

// An agent's error that only says a peer went away (closed its flow, stopped
// reading): the consequence of a failure elsewhere. A reset is not: a live peer
// that resets a flow is the fault.
bool is_about_peers(const std::string& why) {
  for (const char* s : {"the peer closed the connection", "Broken pipe", "End of file"}) {
    if (why.find(s) != std::string::npos) return true;
  }
  return false;
}

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Session = ControlSession<net::ControlStream>;
using WebSocket = Session::WebSocket;
using Clock = std::chrono::steady_clock;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// The failure that ends a run. A dead agent (its connection or process gone)
// explains the errors its peers then report, so it wins over them.
struct Failure {
  // 3: interrupted, timeouts; 2: an agent died or hung; 1: an agent reported an
  // error; 0: an agent reported only that it lost a peer.
  int weight = 0;
  Nanos at = 0;
  std::string message;
};

struct RunFailed {};

// Connections the controller may hold at once: unauthenticated ones (under the
// descriptor limit, after what the run needs: per agent its session and a result
// file, the feeds, the run's own files) and dashboards' feeds.
constexpr std::size_t kMaxFeeds = 32;
std::size_t unauthenticated_cap(std::size_t ranks) {
  return net::pending_cap(net::raise_fd_limit(), 3 * ranks + kMaxFeeds + 32);
}

// Waits of the life cycle that have no limit of their own.
constexpr Nanos kSyncTimeout = 30 * kSecond;          // every agent's clock-sync round
constexpr Nanos kConnectSlack = 5 * kSecond;          // beyond the agents' own connect timeout
constexpr auto kStopGrace = std::chrono::milliseconds(300);  // the culprit's own report comes first
constexpr auto kStopCollect = std::chrono::seconds(5);       // what stopped agents still send
constexpr auto kTlsHandshakeTimeout = std::chrono::seconds(3);  // like a request's (http_router.hpp)

class RunLifecycle final : public Session::Handler {
 public:
  RunLifecycle(const Profile& p, const ControllerOptions& o, Launcher& l)
      : p_(p),
        o_(o),
        launcher_(l),
        admission_(unauthenticated_cap(p.ranks.size()), std::max<std::size_t>(2, unauthenticated_cap(p.ranks.size()) / 4)),
        notifier_(ctx_.get_executor()),
        syncer_(notifier_, [] { return realtime_ns(); }),
        signals_(ctx_, SIGINT, SIGTERM),
        ticker_(ctx_),
        resync_(ctx_),
        progress_(p.ranks.size(), o.settings.iterations ? o.settings.iterations : p.iterations),
        line_(o.quiet) {
    token_ = o.token.empty() ? random_token() : o.token;
    if (!o.tls_cert.empty()) tls_ = net::tls_server_context(o.tls_cert, o.tls_key);
    outcome_.out_dir = o.out_dir;
    flow_bytes_.assign(p.flows.size(), 0);
  }

  RunOutcome run() {
    std::error_code fec;
    std::filesystem::create_directories(o_.out_dir, fec);
    if (fec) throw std::runtime_error(o_.out_dir + ": cannot create: " + fec.message());
    listen();
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (ec) return;
      outcome_.interrupted = true;
      fail(3, "interrupted by signal " + std::to_string(sig));
    });
    spawn(accept_loop());
    asio::co_spawn(ctx_, lifecycle(), [this](std::exception_ptr e) {
      if (e) fail(3, "controller: " + net::what_of(e));
      finish();
    });
    tick();
    // Once finished, sessions close and the context runs dry. A session that does
    // not (an agent that neither closes nor stops answering heartbeats) gets
    // kDrainDeadline, then the context is stopped: the results are written already.
    while (!ctx_.stopped()) {
      ctx_.run_for(std::chrono::milliseconds(100));
      if (finished_at_ && !ctx_.stopped() && Clock::now() - *finished_at_ > kDrainDeadline) {
        // Named for what it is: sessions still open, or (every connection closed)
        // some other wait still pending.
        const auto open = std::count_if(sessions_.begin(), sessions_.end(), [](const auto& x) { return !x->closed(); });
        const std::string after = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kDrainDeadline).count()) +
                                  " s after the end of the run";
        line_.log(open > 0 ? std::to_string(open) + " of " + std::to_string(sessions_.size()) + " connection(s) still open " + after + ": closed"
                           : "every connection closed, but a wait was still pending " + after + " (" + live_.text() + "): stopped");
        ctx_.stop();
      }
    }
    if (rejected_ > 1) line_.log("rejected " + std::to_string(rejected_) + " request(s) or connection(s) in all (no token, or too large)");
    if (admission_.refused() + admission_.evicted() > 0) {
      line_.log("closed " + std::to_string(admission_.refused() + admission_.evicted()) +
                " unauthenticated connection(s) in all over the caps (" + std::to_string(admission_.evicted()) +
                " of them the oldest, for newer ones; " + std::to_string(admission_.refused()) + " refused)");
    }
    launcher_.stop(2 * kSecond);
    // Every agent's end leaves a line: those that did not exit cleanly after the
    // run (killed by a signal, or by the stop after its grace) are named here.
    for (const auto& [hint, why] : launcher_.ended()) {
      if (why.find("exited with status 0") == std::string::npos) line_.log("rank " + std::to_string(hint) + " (not joined): " + why);
    }
    line_.end();
    return std::move(outcome_);
  }

  // ---- HTTP (the router's Api) --------------------------------------------------

  // A line for the 1st, 10th, 100th, ... stranger turned away (anyone may knock,
  // for as long as the run listens): the log grows by a few lines, not one each.
  void rejected(const std::string& line) {
    if (net::log_refusal(++rejected_)) line_.log(line + " (" + std::to_string(rejected_) + " so far)");
  }

  // The dashboard's page holds no run data (it reads the token from its URL's
  // fragment, which browsers never send): served to anyone, when asked for.
  std::optional<HttpReply> page(const std::string& path) const {
    if (!o_.dashboard || path != kDashboardPath) return std::nullopt;
    return HttpReply{beast::http::status::ok, "text/html; charset=utf-8", web::dashboard_page()};
  }

  HttpReply get(const std::string& path) const {
    if (path == "/metrics") {
      return {beast::http::status::ok, "text/plain; version=0.0.4", metrics_text(o_.run_id, p_.flows, flow_bytes_, progress_, joined(), status().agents)};
    }
    if (path == "/api/runs") {
      return {beast::http::status::ok, "application/json", json_text(nlohmann::json::array({run_brief_json(status(), progress_)}), 2) + "\n"};
    }
    if (path == "/api/runs/" + o_.run_id) return {beast::http::status::ok, "application/json", json_text(status_json(), 2) + "\n"};
    return {beast::http::status::not_found, "text/plain", "no such endpoint\n"};
  }

  // A WebSocket whose request was read after the run ended (accepted before, the
  // request finished after): sent `last` and closed, never a session the end of
  // the run would wait for.
  asio::awaitable<void> after_the_end(WebSocket& ws, const std::string& last) {
    ws.text(true);
    if (auto [ec, n] = co_await ws.async_write(asio::buffer(last), kTuple); !ec) {
      co_await ws.async_close(beast::websocket::close_reason(beast::websocket::close_code::normal), kTuple);
    }
  }

  asio::awaitable<void> agent(WebSocket ws, std::string peer) {
    if (finished_at_) {
      line_.log("turned away an agent from " + peer + ": the run has ended");
      const std::string last = encode(control::Stop{"the run has ended"});
      co_await after_the_end(ws, last);
      co_return;
    }
    auto s = std::make_shared<Session>(std::move(ws), std::move(peer), o_.heartbeat);
    sessions_.push_back(s);
    co_await s->run_agent(*this, [] { return realtime_ns(); });
    // One that never became an agent of the run (it left before its hello, or
    // was turned away) is forgotten: a token holder's loop of them grew the
    // controller by 4 KB each. (What iterates the sessions across a yield holds
    // a copy.)
    if (!s->state.hello && !s->state.rank) std::erase(sessions_, s);
  }

  asio::awaitable<void> feed(WebSocket ws, std::string peer) {
    if (finished_at_) {
      // (Built before the co_await: GCC 12 miscompiles string literals inside one.)
      const std::string last = nlohmann::json{{"type", "status"}, {"run", status_json()}}.dump();
      co_await after_the_end(ws, last);
      co_return;
    }
    if (feeds_.size() >= kMaxFeeds) {
      line_.log("turned away a feed from " + peer + ": " + std::to_string(kMaxFeeds) + " feeds open already");
      co_await ws.async_close(beast::websocket::close_reason(beast::websocket::close_code::try_again_later), kTuple);
      co_return;
    }
    auto s = std::make_shared<Session>(std::move(ws), std::move(peer), kHeartbeatTimeout, kMaxFeedMessage);
    feeds_.push_back(s);
    s->send_text(nlohmann::json{{"type", "status"}, {"run", status_json()}}.dump());
    co_await s->run_feed();
    feeds_.erase(std::remove(feeds_.begin(), feeds_.end(), s), feeds_.end());
  }

 private:
  template <typename Task>
  void spawn(Task task) {
    net::spawn_task(ctx_, std::move(task), [this](const std::string& why) { fail(3, "controller: " + why); });
  }

  void listen() {
    const auto [host, port] = split_host_port(o_.listen, "--listen");
    error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec) throw std::runtime_error("--listen: \"" + host + "\" is not an IP address");
    acceptor_.emplace(net::open_listener(ctx_, tcp::endpoint(address, port)));
    address_ = net::endpoint_text(acceptor_->local_endpoint());
    if (o_.on_listening) o_.on_listening(address_, token_);
  }

  // Every connection is accepted (the backlog never fills with strangers) and
  // admitted while under the caps on unauthenticated connections: the rest are
  // closed at once, a line in the log for the 1st, 10th, 100th, ... of them.
  asio::awaitable<void> accept_loop() {
    const LiveTasks::Count counted(live_.accepting);
    auto on_socket = [this](tcp::socket sock) {
      auto ticket = net::admit_socket(admission_, sock, "a connection", [this](const std::string& line) { line_.log(line); });
      if (!ticket) return;
      error_code pec;
      const auto rep = sock.remote_endpoint(pec);
      std::string peer = pec ? "?" : rep.address().to_string() + ":" + std::to_string(rep.port());
      spawn(serve(net::ControlStream(beast::tcp_stream(std::move(sock)), tls_.get()), std::move(peer), std::move(*ticket)));
    };
    co_await net::accept_connections(*acceptor_, on_socket, [this](const std::string& line) { line_.log(line); });
  }

  // One connection: under TLS its handshake first, within the deadline for an
  // unauthenticated connection (its ticket still held).
  asio::awaitable<void> serve(net::ControlStream stream, std::string peer, net::Admission::Ticket ticket) {
    const LiveTasks::Count counted(live_.serving);
    if (stream.tls()) {
      stream.expires_after(kTlsHandshakeTimeout);
      if (auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, kTuple); ec) {
        // A scan or a flood fails handshakes by the thousand: a line for the 1st, 10th, 100th, ...
        if (net::log_refusal(++tls_failures_)) {
          line_.log("rejected a connection from " + peer + ": TLS handshake failed: " + net::tls_error_text(stream, ec) + " (" +
                    std::to_string(tls_failures_) + " so far)");
        }
        co_return;
      }
      stream.expires_never();
    }
    co_await serve_http(std::move(stream), std::move(peer), token_, *this, std::move(ticket));
  }

  // ---- an agent's messages (Session::Handler) ------------------------------------

  void on_message(Session& s, const AgentMessage& m, Nanos received) override {
    std::visit([&](const auto& msg) { handle(s, msg, received); }, m);
    notifier_.notify();
  }

  void on_data(Session& s, std::string_view bytes) override {
    if (!s.results) throw std::runtime_error("sent binary data outside a file");
    s.results->data(bytes);
    notifier_.notify();
  }

  void on_end(Session& s, SessionEnd how, const std::string& why) override {
    AgentState& a = s.state;
    // A slot is an agent's once it said hello: whatever connects to /agent with
    // the token and leaves before that (or was turned away) is no agent of the run.
    if (!a.hello && !a.rank) {
      // A line for the 1st, 10th, 100th, ...: with the token, a loop of them grew
      // the log a line each.
      if (!a.turned_away && net::log_refusal(++left_before_hello_)) {
        line_.log("ignored " + a.who() + " on /agent: it left before its hello" + (why.empty() ? std::string() : " (" + why + ")") + " (" +
                  std::to_string(left_before_hello_) + " so far)");
      }
      notifier_.notify();
      return;
    }
    if (how == SessionEnd::bad_message) {
      fail(2, a.who() + ": " + why);
    } else if (how != SessionEnd::ended && !a.uploaded && !stopping_all_) {
      const bool overflowed = why.starts_with("it read nothing");  // the controller's queue to it (net::Outbox)
      const std::string what = std::string(how == SessionEnd::silent ? "the agent stopped answering heartbeats"
                                           : overflowed              ? "the agent " + why.substr(3)
                                                                     : "the agent disconnected") +
                               (a.done ? " while uploading its results" : "");
      // The agent's own line in the status (the dashboard, /api/runs), not only the run's.
      if (a.error.empty()) a.error = what;
      fail(2, a.who() + ": " + what);
    }
    notifier_.notify();
  }

  void handle(Session& s, const control::Hello& m, Nanos) {
    AgentState& a = s.state;
    if (a.hello) throw std::runtime_error("a second hello");
    if (m.version != kControlVersion) {
      // Told why, so that the agent's own line says it (not only "End of file").
      const std::string why = "the agent speaks control protocol version " + std::to_string(m.version) + ", this controller " +
                              std::to_string(kControlVersion) + " (the same tensorwire release on every host)";
      s.send(control::Stop{why});
      if (net::log_refusal(++turned_away_version_)) line_.log("turned away " + a.who() + ": " + why + " (" + std::to_string(turned_away_version_) + " so far)");
      a.turned_away = true;
      return;
    }
    a.hello = true;
    a.host = m.host;
    a.pid = m.pid;
    a.data_host = m.data_host;
    a.data_port = m.data_port;
    a.rank_hint = m.rank_hint;
    if (stopping_all_) {
      // Dialled in while the run stops (not in the grace before: a launched agent
      // that then exits must not be taken for the failure's cause).
      s.send(control::Stop{failure_ ? failure_->message : std::string("the run has ended")});
      a.hello = false;
      a.turned_away = true;
      return;
    }
    if (assigned_ || joined() > p_.ranks.size()) {
      s.send(control::Stop{"this run has all its agents"});
      if (net::log_refusal(++turned_away_full_)) {
        line_.log("turned away " + a.who() + ": the run has all its agents (" + std::to_string(turned_away_full_) + " so far)");
      }
      a.hello = false;
      a.turned_away = true;
    }
  }
  void handle(Session& s, const control::Pong& m, Nanos received) { s.on_pong(m.seq, m.t, received); }
  void handle(Session& s, const control::Connected&, Nanos) { s.state.connected = true; }
  void handle(Session& s, const control::Progress& m, Nanos) {
    if (!s.state.rank) return;
    const RankId rank = *s.state.rank;
    for (const auto& it : m.iterations) progress_.iteration(rank, it.index, s.clock.to_controller(it.start), s.clock.to_controller(it.end));
    std::uint64_t sent = 0;
    for (const auto& f : m.flows) {
      if (f.flow < flow_bytes_.size()) flow_bytes_[f.flow] = f.bytes;
      sent += f.bytes;
    }
    progress_.bytes_sent(rank, sent);
    if (progress_.done() == progress_.iterations() && last_iteration_at_ == 0) last_iteration_at_ = realtime_ns();
    publish_progress();
  }
  void handle(Session& s, const control::Done& m, Nanos) {
    AgentState& a = s.state;
    a.done = true;
    a.ok = m.ok;
    a.error = m.error;
    if (!a.ok && !stopping_all_) {
      // The agent's error starts with its rank ("rank 2: flow b ..."): the line
      // names it with its host, address and pid instead.
      std::string why = a.error.empty() ? "failed" : a.error;
      const std::string own = a.rank ? "rank " + std::to_string(*a.rank) + ": " : "";
      if (!own.empty() && why.starts_with(own)) why.erase(0, own.size());
      // A peer's end seen from this side (its connection closed or reset) is the
      // consequence of a failure elsewhere: any other error outranks it.
      fail(is_about_peers(why) ? 0 : 1, a.who() + ": " + why);
    }
  }
  void handle(Session& s, const control::FileBegin& m, Nanos) {
    if (!s.state.rank || !s.results) throw std::runtime_error("sent a file before it had a rank");
    s.results->begin(m);
  }
  void handle(Session& s, const control::Uploaded&, Nanos) {
    if (s.results && s.results->in_file()) throw std::runtime_error("said uploaded in the middle of a file");
    s.state.uploaded = true;
    s.send(control::Bye{});
  }

  // ---- the run ------------------------------------------------------------------

  std::size_t joined() const {
    return static_cast<std::size_t>(
        std::count_if(sessions_.begin(), sessions_.end(), [](const auto& s) { return s->state.hello && !s->closed(); }));
  }

  std::vector<Session*> ranked() const {
    std::vector<Session*> out(p_.ranks.size(), nullptr);
    for (const auto& s : sessions_) {
      if (s->state.rank) out[*s->state.rank] = s.get();
    }
    return out;
  }

  void fail(int weight, std::string message) {
    if (!failure_ || weight > failure_->weight) failure_ = Failure{weight, realtime_ns(), std::move(message)};
    notifier_.notify();
  }

  // Waits until `done()` holds; throws RunFailed on a failure or at the deadline
  // (none when `timeout` is nullopt: only the run phase, whose agents have their
  // own idle timeout and heartbeats). `what` describes the wait, for the error.
  template <typename Pred, typename What>
  asio::awaitable<void> wait_until(Pred done, std::optional<Nanos> timeout, What what) {
    const auto deadline = timeout ? Clock::now() + std::chrono::nanoseconds(*timeout) : Clock::time_point::max();
    for (;;) {
      check_launched();
      if (failure_) throw RunFailed{};
      if (done()) co_return;
      if (Clock::now() >= deadline) {
        fail(3, what() + " after " + human_duration(*timeout));
        throw RunFailed{};
      }
      co_await notifier_.wait(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    }
  }

  template <typename F>
  bool every_ranked(F f) const {
    return std::all_of(sessions_.begin(), sessions_.end(), [&f](const auto& s) { return !s->state.rank || f(s->state); });
  }

  // "rank 2 (host, ...) had not connected their flows"
  template <typename F>
  std::string not_yet(const std::string& what, F f) const {
    std::string names;
    int n = 0;
    for (const auto& s : sessions_) {
      if (s->state.rank && !f(s->state) && n++ < 3) names += (names.empty() ? "" : ", ") + s->state.who();
    }
    return names.empty() ? "every agent " + what : names + (n > 3 ? " and others" : "") + " had not " + what;
  }

  void check_launched() {
    for (const auto& [hint, why] : launcher_.ended()) {
      Session* s = nullptr;
      for (const auto& x : sessions_) {
        if (x->state.rank_hint == hint || (x->state.rank && *x->state.rank == hint && !x->state.rank_hint)) s = x.get();
      }
      if ((s && s->state.uploaded) || stopping_all_) {
        // It ended after its work, or as the run stops: no failure, but a death by
        // a signal or an error status is still said.
        // An agent told to stop exits 1 by design: only a signal is news then.
        const bool expected = why.find("exited with status 0") != std::string::npos ||
                              (stopping_all_ && !(s && s->state.uploaded) && why.find("exited with status") != std::string::npos);
        if (!expected) line_.log((s ? s->state.who() : "rank " + std::to_string(hint) + " (not joined)") + ": " + why);
        continue;
      }
      fail(2, (s ? s->state.who() : "rank " + std::to_string(hint) + " (not joined)") + ": " + why);
    }
  }

  asio::awaitable<void> lifecycle() {
    const Nanos launched = realtime_ns();
    try {
      prepare_setups();
      Nanos phase_end = realtime_ns();
      outcome_.setup_phases.prepare = phase_end - launched;
      launcher_.launch(address_, token_);
      state_ = RunState::joining;
      const auto all_joined = [this] { return joined() >= p_.ranks.size(); };
      const auto join_what = [this] {
        return "only " + std::to_string(joined()) + " of " + std::to_string(p_.ranks.size()) + " agents (" + launcher_.describe() +
               ") dialled in to " + address_;
      };
      co_await wait_until(all_joined, o_.join_timeout, join_what);
      outcome_.setup_phases.join = realtime_ns() - phase_end;
      phase_end += outcome_.setup_phases.join;
      co_await assign();
      state_ = RunState::connecting;
      const auto all_connected = [this] { return every_ranked([](const AgentState& a) { return a.connected; }); };
      const auto connect_what = [this] { return not_yet("connected their flows", [](const AgentState& a) { return a.connected; }); };
      co_await wait_until(all_connected, o_.settings.connect_timeout + kConnectSlack, connect_what);
      outcome_.setup_phases.connect = realtime_ns() - phase_end;
      phase_end += outcome_.setup_phases.connect;
      state_ = RunState::syncing;
      co_await sync_all();
      outcome_.setup_phases.sync = realtime_ns() - phase_end;
      const Nanos at = realtime_ns() + o_.start_lead;
      for (Session* s : ranked()) {
        if (s) s->send(control::Start{s->clock.empty() ? at : s->clock.points().back().second.to_agent(at)});
      }
      outcome_.setup_ns = at - launched;
      start_at_ = at;
      state_ = RunState::running;
      spawn(resync_loop());
      const auto all_done = [this] { return every_ranked([](const AgentState& a) { return a.done; }); };
      const auto done_what = [this] { return not_yet("finished the run", [](const AgentState& a) { return a.done; }); };
      co_await wait_until(all_done, o_.run_timeout, done_what);
      state_ = RunState::collecting;
      const auto all_uploaded = [this] { return every_ranked([](const AgentState& a) { return a.uploaded; }); };
      const auto upload_what = [this] { return not_yet("uploaded results", [](const AgentState& a) { return a.uploaded; }); };
      co_await wait_until(all_uploaded, o_.collect_timeout, upload_what);
    } catch (const RunFailed&) {
    }
    if (failure_) co_await stop_all();
  }

  // After a failure: every other agent stops and sends what it measured; a
  // moment's grace lets the agent that caused it be named rather than its peers.
  asio::awaitable<void> stop_all() {
    state_ = RunState::stopping;
    asio::steady_timer grace(ctx_);
    grace.expires_after(kStopGrace);
    co_await grace.async_wait(kTuple);
    check_launched();
    stopping_all_ = true;
    for (const auto& s : sessions_) {
      if (!s->state.done && !s->closed()) s->send(control::Stop{failure_->message});
    }
    const auto deadline = Clock::now() + kStopCollect;
    const auto settled = [this] {
      return std::all_of(sessions_.begin(), sessions_.end(),
                         [](const auto& s) { return s->closed() || s->state.uploaded || !s->state.rank; });
    };
    while (Clock::now() < deadline && !settled()) co_await notifier_.wait(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
  }

  // Writes the profile to the run directory and finds each rank's part of it
  // (the set-up traffic then grows with the profile, not with the profile times
  // the ranks). Before the launch: for a large profile this takes seconds, which
  // no agent's heartbeat should wait for. Each slice is cut from its part when
  // its setup is sent: every slice lists every rank, so all of them at once
  // would hold ranks x ranks entries (8192 ranks took 1.9 GB).
  void prepare_setups() {
    // Agents get the profile without its observed timings; copied only when it
    // has them (a profile of a 256-rank ring holds half a million ops).
    stripped_.reset();
    if (p_.observed) {
      stripped_ = p_;
      stripped_->observed.reset();
    }
    const Profile& stripped = stripped_ ? *stripped_ : p_;
    const std::string whole = write_profile_yaml(stripped);
    write_file_atomic(run_dir::profile_file(o_.out_dir), whole);
    profile_bytes_ = whole.size();
    profile_digest_ = frame::profile_digest(stripped);
    parts_ = slice_parts(stripped);
  }

  // Rank r's slice, from its part (taken), as its setup carries it.
  struct PreparedSlice {
    std::string yaml;
    IndexRuns ops;
    IndexRuns flows;
    std::vector<RankId> peers;    // the ranks the rank's flows reach, and itself, increasing
    std::vector<RankId> sources;  // the ranks that send to it, increasing
    std::vector<Nanos> open_loop_offsets;
  };
  PreparedSlice prepare_slice(std::size_t r) {
    const Profile& stripped = stripped_ ? *stripped_ : p_;
    ProfileSlice slice = slice_profile(stripped, static_cast<RankId>(r), std::move(parts_[r]));
    parts_[r] = {};
    PreparedSlice prepared;
    prepared.yaml = write_profile_yaml(slice.profile);
    prepared.ops = index_runs(slice.global);
    prepared.flows = index_runs(slice.flows);
    prepared.peers.push_back(static_cast<RankId>(r));
    for (const Flow& f : slice.profile.flows) {
      prepared.peers.push_back(f.src == r ? f.dst : f.src);
      if (f.dst == r) prepared.sources.push_back(f.src);
    }
    for (auto* v : {&prepared.peers, &prepared.sources}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    if (!o_.settings.open_loop_offsets.empty()) {
      prepared.open_loop_offsets.reserve(slice.global.size());
      for (const OpIndex g : slice.global) prepared.open_loop_offsets.push_back(o_.settings.open_loop_offsets.at(g));
    }
    return prepared;
  }

  // Assigns ranks and sends each agent its setup, yielding after each, so that
  // heartbeats are answered while hundreds of setups are encoded.
  asio::awaitable<void> assign() {
    const auto keep = sessions_;  // alive across the yields
    std::vector<Session*> pool;
    std::vector<std::optional<RankId>> hints;
    for (const auto& s : sessions_) {
      if (s->state.hello && !s->closed()) {
        pool.push_back(s.get());
        hints.push_back(s->state.rank_hint);
      }
    }
    const auto ranks = assign_ranks(hints, p_.ranks.size());
    for (std::size_t i = 0; i < pool.size(); ++i) {
      if (!ranks[i]) continue;
      pool[i]->state.rank = *ranks[i];
      pool[i]->results.emplace(o_.out_dir, *ranks[i]);
    }
    assigned_ = true;
    const std::vector<Session*> by_rank = ranked();
    // Automatic I/O threads share a machine's cores among its agents: those
    // that name the same host, unless the run says how many share this one
    // (--local, --testbed).
    std::map<std::string, std::uint32_t> agents_on_host;
    for (const Session* s : by_rank) {
      if (s != nullptr) ++agents_on_host[s->state.host];
    }
    // Each agent gets its rank's slice, cut now from its part, and where its
    // peers listen.
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      if (failure_) throw RunFailed{};
      PreparedSlice slice = prepare_slice(r);
      control::Setup setup;
      setup.run = o_.run_id;
      setup.rank = static_cast<RankId>(r);
      setup.profile = std::move(slice.yaml);
      setup.ops = std::move(slice.ops);
      setup.profile_ops = p_.ops.size();
      setup.flows = std::move(slice.flows);
      setup.profile_flows = p_.flows.size();
      setup.profile_digest = profile_digest_;
      for (const RankId peer : slice.peers) setup.roster.push_back({peer, by_rank[peer]->state.data_host, by_rank[peer]->state.data_port});
      setup.settings = o_.settings;
      setup.settings.open_loop_offsets = std::move(slice.open_loop_offsets);
      if (setup.settings.machine_agents == 0 && !by_rank[r]->state.host.empty()) {
        setup.settings.machine_agents = agents_on_host[by_rank[r]->state.host];
      }
      setup.slowdown = r < o_.slowdown.size() ? o_.slowdown[r] : 1.0;
      setup.data_token = data_token_;
      if (o_.pair_delay) {
        for (const RankId src : slice.sources) {
          if (const Nanos d = o_.pair_delay(src, static_cast<RankId>(r)); d != 0) setup.delay_from.emplace_back(src, d);
        }
      }
      std::string message = encode(ControllerMessage{setup});
      setup_bytes_ += message.size();
      by_rank[r]->send_text(std::move(message));
      co_await asio::post(ctx_, asio::use_awaitable);
    }
  }

  std::vector<std::shared_ptr<ClockPeer>> ranked_peers() const {
    std::vector<std::shared_ptr<ClockPeer>> out;
    for (const auto& s : sessions_) {
      if (s->state.rank) out.push_back(s);
    }
    return out;
  }

  asio::awaitable<void> sync_all() {
    const auto peers = ranked_peers();
    const auto sync_what = [] { return std::string("clock synchronisation did not finish"); };
    co_await syncer_.round_all(peers, o_.sync_samples, [this, sync_what](std::function<bool()> done) {
      return wait_until(std::move(done), kSyncTimeout, sync_what);
    });
    for (Session* s : ranked()) {
      if (s && s->clock.empty()) {
        fail(2, s->state.who() + ": no clock-sync answer");
        throw RunFailed{};
      }
    }
  }

  // Re-syncs every running agent every few seconds; an agent whose last round
  // still runs (slow to answer) is skipped until it ended.
  asio::awaitable<void> resync_loop() {
    while (state_ == RunState::running) {
      resync_.expires_after(std::chrono::nanoseconds(o_.resync_every));
      co_await resync_.async_wait(kTuple);
      if (state_ != RunState::running) co_return;
      for (const auto& s : sessions_) {
        if (s->state.rank && !s->state.done && !s->closed() && !s->syncing()) spawn(resync_one(s));
      }
    }
  }
  asio::awaitable<void> resync_one(std::shared_ptr<Session> s) {
    const LiveTasks::Count counted(live_.resyncing);
    co_await syncer_.round(s, 8);
  }

  // ---- the end ------------------------------------------------------------------

  void finish() {
    state_ = failure_ ? RunState::failed : RunState::done;
    const Nanos t0 = realtime_ns();
    for (Session* s : ranked()) {
      // An agent whose run went well and that said its results were uploaded sent
      // both files: without one, the run is no result (it was written done, and
      // only reading it found the rank's records missing).
      if (s && s->state.done && s->state.ok && s->state.uploaded) {
        for (const std::string& name : {run_dir::summary_name(*s->state.rank), run_dir::records_name(*s->state.rank)}) {
          if (!s->results || std::find(s->results->files().begin(), s->results->files().end(), name) == s->results->files().end()) {
            fail(3, s->state.who() + ": said its results were uploaded, but sent no " + name);
          }
        }
      }
      if (!s || !s->results) continue;
      try {
        s->results->merge(s->clock, s->state.host, s->state.who());
      } catch (const std::exception& e) {
        fail(3, e.what());
      }
    }
    if (failure_) state_ = RunState::failed;
    outcome_.collect_ns = last_iteration_at_ ? realtime_ns() - last_iteration_at_ : realtime_ns() - t0;
    outcome_.ok = !failure_;
    if (failure_) outcome_.error = failure_->message;
    outcome_.iterations = progress_.job_iterations();
    outcome_.bytes_sent = progress_.total_bytes_sent();
    for (Session* s : ranked()) {
      if (!s) continue;
      AgentInfo a;
      a.rank = *s->state.rank;
      a.host = s->state.host;
      a.peer = s->state.peer;
      a.pid = s->state.pid;
      a.clock = s->clock;
      a.finished = s->state.done && s->state.ok;
      a.uploaded = s->state.uploaded;
      a.error = s->state.error;
      outcome_.agents.push_back(std::move(a));
    }
    write_run_json();
    publish_status();
    stopping_all_ = true;
    finished_at_ = Clock::now();
    // Close everything; the context then runs dry and run() returns. An agent
    // that uploaded has a bye queued: it goes out first (closing at once dropped
    // it, and the agent then took the end for a lost controller); the agent's
    // close, or at worst the heartbeat timeout, ends that session.
    error_code ignored;
    if (acceptor_) acceptor_->close(ignored);
    signals_.cancel(ignored);
    ticker_.cancel();
    resync_.cancel();
    for (const auto& s : sessions_) {
      if (s->state.uploaded) {
        s->finish();
      } else {
        s->close();
      }
    }
    // Feeds too: the final status just queued reaches the dashboards before the close.
    for (const auto& s : feeds_) s->finish();
    notifier_.notify();
  }

  RunStatus status() const {
    RunStatus st;
    st.id = o_.run_id;
    st.state = state_;
    st.profile = o_.profile_name;
    st.ranks = p_.ranks.size();
    st.controller = address_;
    st.out_dir = o_.out_dir;
    st.start_ns = start_at_;
    for (const auto& s : sessions_) {
      const AgentState& a = s->state;
      if (!a.hello && !a.rank) continue;
      st.agents.push_back({a.rank, a.host, a.peer, a.pid, a.connected, a.done, s->clock, a.error});
    }
    if (failure_) st.error = failure_->message;
    return st;
  }

  nlohmann::json status_json() const { return run_status_json(status(), progress_); }

  void write_run_json() {
    nlohmann::json j = status_json();
    j["settings"] = to_json(o_.settings);
    j["settings"].erase("open_loop_offsets_ns");
    j["token"] = "(not stored)";
    nlohmann::json its = nlohmann::json::array();
    for (const auto& [s, e] : progress_.job_iterations()) its.push_back({s, e});
    j["iteration_times_ns"] = std::move(its);
    j["setup_ns"] = outcome_.setup_ns;
    j["setup_phases_ns"] = setup_phases_json(outcome_);
    j["setup_bytes"] = {{"profile", profile_bytes_}, {"sent", setup_bytes_}};
    j["time_scale"] = o_.time_scale;
    try {
      write_file_atomic(run_dir::run_file(o_.out_dir), json_text(j, 2) + "\n");
    } catch (const std::exception& e) {
      if (!failure_) failure_ = Failure{3, realtime_ns(), e.what()};
    }
  }

  // ---- live output ----------------------------------------------------------------

  void publish_progress() {
    const Nanos now = realtime_ns();
    if (now - last_publish_ < 100 * kMilli && !progress_.finished()) return;
    last_publish_ = now;
    const std::string text = feed_progress_json(progress_, p_.flows, flow_bytes_).dump();
    for (const auto& f : feeds_) f->send_text(text);
  }

  void publish_status() {
    const std::string text = nlohmann::json{{"type", "status"}, {"run", status_json()}}.dump();
    for (const auto& f : feeds_) f->send_text(text);
  }

  // Redraws the progress line every 250 ms until the run finished. finish()
  // cancels the timer, but a tick that had fired and was queued by then runs
  // with success: it must not arm the next, or the context never runs dry (the
  // end of a run then waited out its 10 s drain deadline, about once in ten
  // 256-agent runs).
  void tick() {
    ticker_.expires_after(std::chrono::milliseconds(250));
    ticker_.async_wait([this](const error_code& ec) {
      if (ec || finished_at_) return;
      if (state_ != last_state_) {
        last_state_ = state_;
        publish_status();
      }
      if (state_ == RunState::running) {
        std::optional<Nanos> last;
        if (progress_.done() > 0) last = progress_.job_iterations().back().second - progress_.job_iterations().back().first;
        line_.draw(progress_.done(), progress_.iterations(), last, progress_.bytes_per_second() * 8);
      }
      tick();
    });
  }

  const Profile& p_;
  const ControllerOptions& o_;
  Launcher& launcher_;
  std::unique_ptr<asio::ssl::context> tls_;  // null: plain TCP; outlives the streams in ctx_'s frames
  std::uint64_t tls_failures_ = 0;
  std::uint64_t rejected_ = 0;  // requests and connections without the token, or too large
  // The controller's own tasks still running, named when the end of a run waits
  // for something after every connection closed.
  struct LiveTasks {
    struct Count {
      explicit Count(int& n) : n_(n) { ++n_; }
      ~Count() { --n_; }
      Count(const Count&) = delete;
      Count& operator=(const Count&) = delete;
      int& n_;
    };
    int accepting = 0, serving = 0, resyncing = 0;
    std::string text() const {
      return "tasks still running: " + std::to_string(serving) + " connection(s) being served, " + std::to_string(resyncing) +
             " clock resync(s), " + std::to_string(accepting) + " accept loop(s)";
    }
  };
  LiveTasks live_;
  std::uint64_t profile_bytes_ = 0;  // the whole profile as YAML
  std::uint64_t setup_bytes_ = 0;    // the setup messages sent, slices and all
  std::uint64_t profile_digest_ = 0;
  std::optional<Profile> stripped_;  // the profile without its observed timings, if it had them
  std::vector<SliceParts> parts_;    // per rank, until its setup is sent
  asio::io_context ctx_{1};
  std::optional<tcp::acceptor> acceptor_;
  net::Admission admission_;
  Notifier notifier_;
  ClockSyncer syncer_;
  asio::signal_set signals_;
  asio::steady_timer ticker_;
  asio::steady_timer resync_;
  RunProgress progress_;
  ProgressLine line_;
  std::string token_;
  const std::string data_token_ = random_token();  // what peers present on data flows
  std::string address_;
  std::vector<std::shared_ptr<Session>> sessions_;
  std::uint64_t left_before_hello_ = 0;  // connections to /agent that left before their hello
  std::uint64_t turned_away_full_ = 0;  // agents turned away because the run had all its agents
  std::uint64_t turned_away_version_ = 0;  // ... because they speak another control protocol version
  std::vector<std::shared_ptr<Session>> feeds_;
  std::vector<std::uint64_t> flow_bytes_;
  std::optional<Failure> failure_;
  RunState state_ = RunState::starting;
  std::optional<RunState> last_state_;
  bool assigned_ = false;
  bool stopping_all_ = false;
  std::optional<Clock::time_point> finished_at_;  // when finish() ran
  static constexpr Clock::duration kDrainDeadline = std::chrono::seconds(10);
  Nanos start_at_ = 0;
  Nanos last_publish_ = 0;
  Nanos last_iteration_at_ = 0;
  RunOutcome outcome_;
};

}  // namespace

nlohmann::json setup_phases_json(const RunOutcome& o) {
  const auto& p = o.setup_phases;
  const Nanos lead = o.setup_ns > 0 ? o.setup_ns - p.prepare - p.join - p.connect - p.sync : 0;
  return {{"prepare", p.prepare}, {"join", p.join}, {"connect", p.connect}, {"sync", p.sync}, {"start_lead", lead}};
}

RunOutcome run_controller(const Profile& profile, const ControllerOptions& options, Launcher& launcher) {
  RunLifecycle run(profile, options, launcher);
  return run.run();
}

}  // namespace tw

#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/controller/controller.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <set>

#include "tensorwire/agent/agent.hpp"
#include "tensorwire/core/records.hpp"
#include "tensorwire/controller/run_progress.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Ws = websocket::stream<beast::tcp_stream>;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// The failure that ends a run. A dead agent (its connection or process gone)
// explains the errors its peers then report, so it wins over them.
struct Failure {
  int weight = 0;  // 2: an agent died or hung; 1: an agent reported an error; 3: interrupted, timeouts
  Nanos at = 0;
  std::string message;
};

// Wakes coroutines waiting for the run's state to change.
class Notifier {
 public:
  explicit Notifier(asio::io_context& ctx) : ctx_(ctx) {}
  // Waits until notified or until the deadline (CLOCK_MONOTONIC via steady_timer).
  asio::awaitable<void> wait(std::chrono::steady_clock::time_point deadline) {
    asio::steady_timer t(ctx_);
    t.expires_at(deadline);
    waiting_.insert(&t);
    co_await t.async_wait(kTuple);
    waiting_.erase(&t);
  }
  void notify() {
    for (auto* t : waiting_) t->cancel();
  }

 private:
  asio::io_context& ctx_;
  std::set<asio::steady_timer*> waiting_;
};

struct RunFailed {};

// One agent's control connection.
struct Session : std::enable_shared_from_this<Session> {
  Session(Ws ws, std::string peer) : ws(std::move(ws)), peer(std::move(peer)), wakeup(this->ws.get_executor()) {}
  Ws ws;
  std::string peer;
  asio::steady_timer wakeup;
  std::deque<std::string> outbox;
  bool closed = false;
  // hello
  bool hello = false;
  std::string host;
  long pid = 0;
  std::string data_host;
  std::uint16_t data_port = 0;
  std::optional<RankId> rank_hint;
  // run
  std::optional<RankId> rank;
  bool connected = false;
  bool done = false;
  bool ok = false;
  bool uploaded = false;
  std::string error;
  // clock sync
  std::uint64_t ping_seq = 0;
  Nanos ping_sent = 0;
  std::optional<ClockSample> pong;
  ClockTrack clock;
  // the file being received
  std::string file_name;
  std::uint64_t file_left = 0;
  std::unique_ptr<std::ofstream> file;
  std::vector<std::string> files;  // received, by name

  std::string who() const {
    std::string s = rank ? "rank " + std::to_string(*rank) : std::string("an agent");
    s += " (" + (host.empty() ? peer : host + ", " + peer) + (pid ? ", pid " + std::to_string(pid) : "") + ")";
    return s;
  }

  void send(const nlohmann::json& j) {
    if (closed) return;
    outbox.push_back(j.dump());
    wakeup.cancel();
  }
};

class Controller {
 public:
  Controller(const Profile& p, const ControllerOptions& o, Launcher& l)
      : p_(p),
        o_(o),
        launcher_(l),
        acceptor_(ctx_),
        notifier_(ctx_),
        signals_(ctx_, SIGINT, SIGTERM),
        ticker_(ctx_),
        resync_(ctx_),
        progress_(p.ranks.size(), o.settings.iterations ? o.settings.iterations : p.iterations) {
    token_ = o.token.empty() ? random_token() : o.token;
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
    asio::co_spawn(ctx_, accept_loop(), asio::detached);
    asio::co_spawn(ctx_, lifecycle(), [this](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          fail(3, std::string("controller: ") + ex.what());
        }
      }
      finish();
    });
    tick();
    ctx_.run();
    launcher_.stop(2 * kSecond);
    end_progress_line();
    return std::move(outcome_);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // ---- server ---------------------------------------------------------------

  void listen() {
    const auto [host, port] = split_host_port(o_.listen, "--listen");
    error_code ec;
    const tcp::endpoint ep(asio::ip::make_address(host, ec), port);
    if (ec) throw std::runtime_error("--listen: \"" + host + "\" is not an IP address");
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + o_.listen + ": " + ec.message());
    const auto local = acceptor_.local_endpoint();
    address_ = (local.address().is_v6() ? "[" + local.address().to_string() + "]" : local.address().to_string()) + ":" +
               std::to_string(local.port());
    if (o_.on_listening) o_.on_listening(address_, token_);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, sock] = co_await acceptor_.async_accept(kTuple);
      if (!acceptor_.is_open()) co_return;
      if (ec) continue;
      asio::co_spawn(ctx_, serve(std::move(sock)), asio::detached);
    }
  }

  static std::string bearer(const http::request<http::string_body>& req) {
    const auto auth = req[http::field::authorization];
    if (auth.starts_with("Bearer ")) return std::string(auth.substr(7));
    // Browsers cannot set headers on a WebSocket: also ?token=.
    const std::string_view target = req.target();
    const auto q = target.find("token=");
    if (q != std::string_view::npos && (target[q - 1] == '?' || target[q - 1] == '&')) {
      const auto end = target.find('&', q);
      return std::string(target.substr(q + 6, end == std::string_view::npos ? end : end - q - 6));
    }
    return {};
  }

  asio::awaitable<void> serve(tcp::socket sock) {
    error_code pec;
    const auto rep = sock.remote_endpoint(pec);
    const std::string peer = pec ? "?" : rep.address().to_string() + ":" + std::to_string(rep.port());
    beast::tcp_stream stream(std::move(sock));
    beast::flat_buffer buf;
    http::request<http::string_body> req;
    stream.expires_after(std::chrono::seconds(5));
    if (auto [ec, n] = co_await http::async_read(stream, buf, req, kTuple); ec) co_return;
    std::string target(req.target().substr(0, req.target().find('?')));
    // (No string literal inside a co_await expression: GCC 12 miscompiles them.)
    Reply reply;
    if (!same_token(bearer(req), token_)) {
      log("rejected " + std::string(websocket::is_upgrade(req) ? "a connection" : "a request") + " from " + peer + " to " +
          target + ": wrong or missing token");
      reply = {http::status::unauthorized, "text/plain", "a valid token is required\n"};
    } else if (websocket::is_upgrade(req)) {
      if (target == kAgentPath || target == "/api/feed") {
        co_await upgrade(std::move(stream), req, peer, target == kAgentPath);
        co_return;
      }
      reply = {http::status::not_found, "text/plain", "no such endpoint\n"};
    } else if (req.method() != http::verb::get) {
      reply = {http::status::method_not_allowed, "text/plain", "GET only\n"};
    } else if (target == "/metrics") {
      reply = {http::status::ok, "text/plain; version=0.0.4", metrics()};
    } else if (target == "/api/runs") {
      reply = {http::status::ok, "application/json", nlohmann::json::array({run_brief()}).dump(2) + "\n"};
    } else if (target == "/api/runs/" + o_.run_id) {
      reply = {http::status::ok, "application/json", status_json().dump(2) + "\n"};
    } else {
      reply = {http::status::not_found, "text/plain", "no such endpoint\n"};
    }
    co_await respond(stream, req, reply);
  }

  struct Reply {
    http::status status = http::status::ok;
    std::string type;
    std::string body;
  };

  asio::awaitable<void> upgrade(beast::tcp_stream stream, const http::request<http::string_body>& req, std::string peer,
                                bool agent) {
    stream.expires_never();
    Ws ws(std::move(stream));
    ws.set_option(websocket::stream_base::timeout{std::chrono::seconds(5), std::chrono::nanoseconds(kHeartbeatTimeout), true});
    ws.read_message_max(std::uint64_t{1} << 31);
    if (auto [ec] = co_await ws.async_accept(req, kTuple); ec) co_return;
    auto s = std::make_shared<Session>(std::move(ws), std::move(peer));
    if (agent) {
      co_await agent_session(s);
    } else {
      co_await feed_session(s);
    }
  }

  static http::response<http::string_body> make_response(const http::request<http::string_body>& req, Reply reply) {
    http::response<http::string_body> res{reply.status, req.version()};
    res.set(http::field::server, "tensorwire");
    res.set(http::field::content_type, reply.type);
    res.keep_alive(false);
    res.body() = std::move(reply.body);
    res.prepare_payload();
    return res;
  }

  static asio::awaitable<void> respond(beast::tcp_stream& stream, const http::request<http::string_body>& req, Reply reply) {
    http::response<http::string_body> res = make_response(req, std::move(reply));
    co_await http::async_write(stream, res, kTuple);
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // ---- sessions ---------------------------------------------------------------

  asio::awaitable<void> writer(std::shared_ptr<Session> s) {
    while (!s->closed) {
      if (s->outbox.empty()) {
        s->wakeup.expires_at(asio::steady_timer::time_point::max());
        co_await s->wakeup.async_wait(kTuple);
        continue;
      }
      const std::string text = std::move(s->outbox.front());
      s->outbox.pop_front();
      s->ws.text(true);
      if (auto [ec, n] = co_await s->ws.async_write(asio::buffer(text), kTuple); ec) co_return;
    }
  }

  asio::awaitable<void> agent_session(std::shared_ptr<Session> s) {
    sessions_.push_back(s);
    asio::co_spawn(ctx_, writer(s), asio::detached);
    beast::flat_buffer buf;
    for (;;) {
      auto [ec, n] = co_await s->ws.async_read(buf, kTuple);
      if (ec) {
        s->closed = true;
        s->wakeup.cancel();
        if (!s->uploaded && !stopping_all_) {
          const bool silent = ec == beast::error::timeout;
          fail(2, s->who() + (silent ? ": the agent stopped answering heartbeats" : ": the agent disconnected") +
                      (s->done ? " while uploading its results" : ""));
        }
        notifier_.notify();
        co_return;
      }
      try {
        if (s->ws.got_binary()) {
          receive_file_data(*s, buf);
        } else {
          const Nanos received = realtime_ns();
          handle(*s, parse_control_message(beast::buffers_to_string(buf.data())), received);
        }
      } catch (const std::exception& e) {
        fail(2, s->who() + ": " + e.what());
        s->closed = true;
        error_code ignored;
        beast::get_lowest_layer(s->ws).socket().close(ignored);
      }
      buf.consume(buf.size());
      notifier_.notify();
    }
  }

  void handle(Session& s, const nlohmann::json& m, Nanos received) {
    const std::string type = m["type"].get<std::string>();
    if (type == "hello") {
      if (s.hello) throw std::runtime_error("a second hello");
      if (m.value("version", 0) != kControlVersion) {
        throw std::runtime_error("speaks control protocol version " + std::to_string(m.value("version", 0)) +
                                 ", this controller " + std::to_string(kControlVersion));
      }
      s.hello = true;
      s.host = m.value("host", std::string("?"));
      s.pid = m.value("pid", 0L);
      s.data_host = m.at("data_host").get<std::string>();
      s.data_port = m.at("data_port").get<std::uint16_t>();
      if (m.contains("rank_hint")) s.rank_hint = m["rank_hint"].get<RankId>();
      if (assigned_ || joined() > p_.ranks.size()) {
        s.send({{"type", "stop"}, {"reason", "this run has all its agents"}});
        log("turned away " + s.who() + ": the run has all its agents");
        s.hello = false;
      }
    } else if (type == "pong") {
      if (m.value("seq", std::uint64_t{0}) == s.ping_seq) s.pong = ClockSample{s.ping_sent, m.at("t").get<Nanos>(), received};
    } else if (type == "connected") {
      s.connected = true;
    } else if (type == "progress") {
      if (!s.rank) return;
      for (const auto& it : m.at("iterations")) {
        const auto index = it.at(0).get<std::uint64_t>();
        progress_.iteration(*s.rank, index, s.clock.to_controller(it.at(1).get<Nanos>()),
                            s.clock.to_controller(it.at(2).get<Nanos>()));
      }
      std::uint64_t sent = 0;
      for (const auto& f : m.at("flows")) {
        const auto flow = f.at(0).get<std::size_t>();
        const auto bytes = f.at(1).get<std::uint64_t>();
        if (flow < flow_bytes_.size()) flow_bytes_[flow] = bytes;
        sent += bytes;
      }
      progress_.bytes_sent(*s.rank, sent);
      if (progress_.done() == progress_.iterations() && last_iteration_at_ == 0) last_iteration_at_ = realtime_ns();
      publish_progress();
    } else if (type == "done") {
      s.done = true;
      s.ok = m.value("ok", false);
      s.error = m.value("error", std::string());
      if (!s.ok && !stopping_all_) fail(1, s.error.empty() ? s.who() + ": failed" : s.error + " [" + s.who() + "]");
    } else if (type == "file") {
      begin_file(s, m);
    } else if (type == "uploaded") {
      if (s.file) throw std::runtime_error("said uploaded in the middle of a file");
      s.uploaded = true;
      s.send({{"type", "bye"}});
    } else {
      throw std::runtime_error("sent an unknown message \"" + type + "\"");
    }
  }

  void begin_file(Session& s, const nlohmann::json& m) {
    if (!s.rank) throw std::runtime_error("sent a file before it had a rank");
    const std::string name = m.at("name").get<std::string>();
    // Only the two files an agent writes, for its own rank: nothing else lands here.
    if (name != run_dir::summary_name(*s.rank) && name != run_dir::records_name(*s.rank)) {
      throw std::runtime_error("sent a file \"" + name + "\" that is not its results");
    }
    s.file_name = name;
    s.file_left = m.at("size").get<std::uint64_t>();
    const auto path = std::filesystem::path(o_.out_dir) / (name + ".agent");
    s.file = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
    if (!*s.file) throw std::runtime_error("cannot create " + path.string());
    if (s.file_left == 0) end_file(s);
  }

  void receive_file_data(Session& s, beast::flat_buffer& buf) {
    if (!s.file) throw std::runtime_error("sent binary data outside a file");
    const std::string data = beast::buffers_to_string(buf.data());
    if (data.size() > s.file_left) throw std::runtime_error("sent more of " + s.file_name + " than announced");
    s.file->write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!*s.file) {
      throw std::runtime_error("cannot write " + s.file_name + " into " + o_.out_dir + ": " + std::strerror(errno));
    }
    s.file_left -= data.size();
    if (s.file_left == 0) end_file(s);
  }

  void end_file(Session& s) {
    s.file->close();
    if (!*s.file) throw std::runtime_error("cannot write " + s.file_name + " into " + o_.out_dir);
    s.file.reset();
    s.files.push_back(s.file_name);
  }

  asio::awaitable<void> feed_session(std::shared_ptr<Session> s) {
    feeds_.push_back(s);
    s->send({{"type", "status"}, {"run", status_json()}});
    asio::co_spawn(ctx_, writer(s), asio::detached);
    beast::flat_buffer buf;
    for (;;) {
      auto [ec, n] = co_await s->ws.async_read(buf, kTuple);
      buf.consume(buf.size());
      if (ec) break;
    }
    s->closed = true;
    s->wakeup.cancel();
    feeds_.erase(std::remove(feeds_.begin(), feeds_.end(), s), feeds_.end());
  }

  // ---- the run ------------------------------------------------------------------

  std::size_t joined() const {
    return static_cast<std::size_t>(std::count_if(sessions_.begin(), sessions_.end(), [](const auto& s) { return s->hello && !s->closed; }));
  }

  std::vector<Session*> ranked() const {
    std::vector<Session*> out(p_.ranks.size(), nullptr);
    for (const auto& s : sessions_) {
      if (s->rank) out[*s->rank] = s.get();
    }
    return out;
  }

  void fail(int weight, std::string message) {
    const Nanos now = realtime_ns();
    if (!failure_ || weight > failure_->weight) failure_ = Failure{weight, now, std::move(message)};
    notifier_.notify();
  }

  // Waits until `done()` holds; throws RunFailed on a failure or at the deadline.
  // `what` describes the wait, for the error at its deadline.
  template <typename Pred, typename What>
  asio::awaitable<void> wait_until(Pred done, Nanos timeout, What what) {
    const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout);
    for (;;) {
      check_launched();
      if (failure_) throw RunFailed{};
      if (done()) co_return;
      if (Clock::now() >= deadline) {
        fail(3, what() + " after " + human_duration(timeout));
        throw RunFailed{};
      }
      co_await notifier_.wait(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    }
  }

  template <typename F>
  bool every_ranked(F f) const {
    return std::all_of(sessions_.begin(), sessions_.end(), [&f](const auto& s) { return !s->rank || f(*s); });
  }

  // "rank 2 (host, ...) has not connected its flows"
  template <typename F>
  std::string not_yet(const std::string& what, F f) const {
    std::string names;
    int n = 0;
    for (const auto& s : sessions_) {
      if (s->rank && !f(*s) && n++ < 3) names += (names.empty() ? "" : ", ") + s->who();
    }
    return names.empty() ? "every agent " + what : names + (n > 3 ? " and others" : "") + " had not " + what;
  }

  void check_launched() {
    for (const auto& [hint, why] : launcher_.ended()) {
      Session* s = nullptr;
      for (const auto& x : sessions_) {
        if (x->rank_hint == hint || (x->rank && *x->rank == hint && !x->rank_hint)) s = x.get();
      }
      if (s && s->uploaded) continue;  // it ended after its work: fine
      if (stopping_all_) continue;
      fail(2, (s ? s->who() : "the agent for rank " + std::to_string(hint)) + ": " + why);
    }
  }

  asio::awaitable<void> lifecycle() {
    const Nanos launched = realtime_ns();
    try {
      launcher_.launch(address_, token_);
      state_ = "joining";
      const auto all_joined = [this] { return joined() >= p_.ranks.size(); };
      const auto join_what = [this] {
        return "only " + std::to_string(joined()) + " of " + std::to_string(p_.ranks.size()) + " agents (" +
               launcher_.describe() + ") dialled in to " + address_;
      };
      co_await wait_until(all_joined, o_.join_timeout, join_what);
      assign();
      state_ = "connecting";
      const auto all_connected = [this] { return every_ranked([](const Session& s) { return s.connected; }); };
      const auto connect_what = [this] { return not_yet("connected their flows", [](const Session& s) { return s.connected; }); };
      co_await wait_until(all_connected, o_.settings.connect_timeout + 5 * kSecond, connect_what);
      state_ = "syncing";
      co_await sync_all(o_.sync_samples);
      const Nanos at = realtime_ns() + o_.start_lead;
      for (Session* s : ranked()) s->send({{"type", "start"}, {"at", s->clock.empty() ? at : s->clock.points().back().second.to_agent(at)}});
      outcome_.setup_ns = at - launched;
      start_at_ = at;
      state_ = "running";
      asio::co_spawn(ctx_, resync_loop(), asio::detached);
      const auto all_done = [this] { return every_ranked([](const Session& s) { return s.done; }); };
      const auto done_what = [this] { return not_yet("finished the run", [](const Session& s) { return s.done; }); };
      co_await wait_until(all_done, o_.run_timeout > 0 ? o_.run_timeout : 365 * 24 * 3600 * kSecond, done_what);
      state_ = "collecting";
      const auto all_uploaded = [this] { return every_ranked([](const Session& s) { return s.uploaded; }); };
      const auto upload_what = [this] { return not_yet("uploaded results", [](const Session& s) { return s.uploaded; }); };
      co_await wait_until(all_uploaded, o_.collect_timeout, upload_what);
    } catch (const RunFailed&) {
    }
    if (failure_) co_await stop_all();
  }

  // After a failure: every other agent stops and sends what it measured; a
  // moment's grace lets the agent that caused it be named rather than its peers.
  asio::awaitable<void> stop_all() {
    state_ = "stopping";
    asio::steady_timer grace(ctx_);
    grace.expires_after(std::chrono::milliseconds(300));
    co_await grace.async_wait(kTuple);
    check_launched();
    stopping_all_ = true;
    for (const auto& s : sessions_) {
      if (!s->done && !s->closed) s->send({{"type", "stop"}, {"reason", failure_->message}});
    }
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < deadline &&
           !std::all_of(sessions_.begin(), sessions_.end(), [](const auto& s) { return s->closed || s->uploaded || !s->rank; })) {
      co_await notifier_.wait(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    }
  }

  void assign() {
    std::vector<Session*> pool;
    for (const auto& s : sessions_) {
      if (s->hello && !s->closed) pool.push_back(s.get());
    }
    std::vector<Session*> by_rank(p_.ranks.size(), nullptr);
    for (Session* s : pool) {  // hints first, in order of arrival
      if (s->rank_hint && *s->rank_hint < by_rank.size() && !by_rank[*s->rank_hint]) {
        by_rank[*s->rank_hint] = s;
        s->rank = *s->rank_hint;
      }
    }
    std::size_t next = 0;
    for (Session* s : pool) {
      if (s->rank) continue;
      while (next < by_rank.size() && by_rank[next]) ++next;
      if (next == by_rank.size()) break;
      by_rank[next] = s;
      s->rank = static_cast<RankId>(next);
    }
    assigned_ = true;
    nlohmann::json roster = nlohmann::json::array();
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      roster.push_back({{"rank", r}, {"host", by_rank[r]->data_host}, {"port", by_rank[r]->data_port}});
    }
    Profile stripped = p_;
    stripped.observed.reset();
    const std::string text = write_profile_yaml(stripped);
    write_file_atomic(run_dir::profile_file(o_.out_dir), text);
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      const double slow = r < o_.slowdown.size() ? o_.slowdown[r] : 1.0;
      std::vector<Nanos> delay_from(by_rank.size(), 0);
      if (o_.pair_delay) {
        for (std::size_t src = 0; src < by_rank.size(); ++src) delay_from[src] = o_.pair_delay(static_cast<RankId>(src), static_cast<RankId>(r));
      }
      by_rank[r]->send({{"type", "setup"},
                        {"delay_from_ns", delay_from},
                        {"run", o_.run_id},
                        {"rank", r},
                        {"profile", text},
                        {"roster", roster},
                        {"settings", to_json(o_.settings)},
                        {"slowdown", slow}});
    }
  }

  asio::awaitable<void> sync_one(std::shared_ptr<Session> s, int samples) {
    std::vector<ClockSample> got;
    for (int k = 0; k < samples && !s->closed; ++k) {
      s->pong.reset();
      s->ping_seq = ++ping_seq_;
      s->ping_sent = realtime_ns();
      s->send({{"type", "ping"}, {"seq", s->ping_seq}});
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      while (!s->pong && !s->closed && Clock::now() < deadline) co_await notifier_.wait(deadline);
      if (s->pong) got.push_back(*s->pong);
    }
    if (const auto e = estimate_clock_offset(got)) s->clock.add(realtime_ns(), *e);
  }

  asio::awaitable<void> sync_all(int samples) {
    std::vector<std::shared_ptr<Session>> ranked_sessions;
    for (const auto& s : sessions_) {
      if (s->rank) ranked_sessions.push_back(s);
    }
    std::size_t pending = ranked_sessions.size();
    for (const auto& s : ranked_sessions) {
      asio::co_spawn(ctx_, sync_one(s, samples), [this, &pending](std::exception_ptr) {
        --pending;
        notifier_.notify();
      });
    }
    const auto synced = [&pending] { return pending == 0; };
    const auto sync_what = [] { return std::string("clock synchronisation did not finish"); };
    co_await wait_until(synced, 30 * kSecond, sync_what);
    for (const auto& s : ranked_sessions) {
      if (s->clock.empty()) {
        fail(2, s->who() + ": no clock-sync answer");
        throw RunFailed{};
      }
    }
  }

  asio::awaitable<void> resync_loop() {
    asio::steady_timer& t = resync_;
    while (state_ == "running") {
      t.expires_after(std::chrono::nanoseconds(o_.resync_every));
      co_await t.async_wait(kTuple);
      if (state_ != "running") co_return;
      for (const auto& s : sessions_) {
        if (s->rank && !s->done && !s->closed) asio::co_spawn(ctx_, sync_one(s, 8), asio::detached);
      }
    }
  }

  // ---- the end ------------------------------------------------------------------

  void finish() {
    state_ = failure_ ? "failed" : "done";
    const Nanos t0 = realtime_ns();
    try {
      merge_results();
    } catch (const std::exception& e) {
      fail(3, e.what());
    }
    outcome_.collect_ns = last_iteration_at_ ? realtime_ns() - last_iteration_at_ : realtime_ns() - t0;
    outcome_.ok = !failure_;
    if (failure_) outcome_.error = failure_->message;
    outcome_.iterations = progress_.job_iterations();
    outcome_.bytes_sent = progress_.total_bytes_sent();
    for (Session* s : ranked()) {
      if (!s) continue;
      AgentInfo a;
      a.rank = *s->rank;
      a.host = s->host;
      a.peer = s->peer;
      a.pid = s->pid;
      a.clock = s->clock;
      a.finished = s->done && s->ok;
      a.uploaded = s->uploaded;
      a.error = s->error;
      outcome_.agents.push_back(std::move(a));
    }
    write_run_json();
    publish_status();
    stopping_all_ = true;
    // Close everything; the context then runs dry and run() returns.
    error_code ignored;
    acceptor_.close(ignored);
    signals_.cancel(ignored);
    ticker_.cancel();
    resync_.cancel();
    for (auto& list : {sessions_, feeds_}) {
      for (const auto& s : list) {
        s->closed = true;
        s->wakeup.cancel();
        beast::get_lowest_layer(s->ws).socket().close(ignored);
      }
    }
    notifier_.notify();
  }

  // Every agent's files, moved onto the controller's clock.
  void merge_results() {
    namespace fs = std::filesystem;
    for (Session* s : ranked()) {
      if (!s) continue;
      const std::string rank = std::to_string(*s->rank);
      const fs::path dir(o_.out_dir);
      const ClockTrack& clock = s->clock;
      const auto to_ctl = [&clock](Nanos t) { return clock.to_controller(t); };
      for (const std::string& name : s->files) {
        const fs::path raw = dir / (name + ".agent");
        const fs::path out = dir / name;
        if (name.ends_with(".twr")) {
          std::ifstream in(raw, std::ios::binary);
          std::ofstream w(out.string() + ".tmp", std::ios::binary | std::ios::trunc);
          char header[16];
          in.read(header, sizeof header);
          if (in.gcount() != sizeof header) throw std::runtime_error(raw.string() + ": truncated records file");
          w.write(header, sizeof header);
          std::vector<Record> batch(4096);
          for (;;) {
            in.read(reinterpret_cast<char*>(batch.data()), static_cast<std::streamsize>(batch.size() * sizeof(Record)));
            const auto n = static_cast<std::size_t>(in.gcount()) / sizeof(Record);
            if (n == 0) break;
            for (std::size_t i = 0; i < n; ++i) batch[i].map_times(to_ctl);
            w.write(reinterpret_cast<const char*>(batch.data()), static_cast<std::streamsize>(n * sizeof(Record)));
          }
          w.close();
          if (!w) throw std::runtime_error("cannot write " + out.string() + " (disk full?)");
          fs::rename(out.string() + ".tmp", out);
        } else {
          std::ifstream in(raw);
          nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
          if (j.is_discarded()) throw std::runtime_error(s->who() + ": uploaded a summary that is not JSON");
          for (const char* k : {"start_ns", "end_ns"}) {
            if (j.contains(k) && j[k].get<Nanos>() > 0) j[k] = to_ctl(j[k].get<Nanos>());
          }
          for (auto& it : j["iteration_times_ns"]) {
            it[0] = to_ctl(it[0].get<Nanos>());
            it[1] = to_ctl(it[1].get<Nanos>());
          }
          j["clock"]["merged_onto"] = "controller";
          j["clock"]["offset_ns"] = clock.empty() ? 0 : clock.points().front().second.offset;
          j["clock"]["bound_ns"] = clock.max_bound();
          j["clock"]["drift_ns"] = clock.drift();
          j["host"] = s->host;
          write_file_atomic(out.string(), j.dump(2) + "\n");
        }
        fs::remove(raw);
      }
    }
  }

  nlohmann::json agents_json() const {
    nlohmann::json agents = nlohmann::json::array();
    for (const auto& s : sessions_) {
      if (!s->hello && !s->rank) continue;
      nlohmann::json a = {{"host", s->host}, {"peer", s->peer}, {"pid", s->pid}, {"connected", s->connected}, {"done", s->done}};
      if (s->rank) a["rank"] = *s->rank;
      if (s->rank) a["iterations_done"] = progress_.rank_done(*s->rank);
      if (!s->clock.empty()) {
        a["clock"] = {{"offset_ns", s->clock.points().back().second.offset},
                      {"bound_ns", s->clock.points().back().second.bound},
                      {"samples", s->clock.points().size()},
                      {"drift_ns", s->clock.drift()}};
      }
      if (!s->error.empty()) a["error"] = s->error;
      agents.push_back(std::move(a));
    }
    return agents;
  }

  nlohmann::json run_brief() const {
    return {{"id", o_.run_id},         {"state", state_},  {"profile", o_.profile_name},
            {"ranks", p_.ranks.size()}, {"iterations", progress_.iterations()},
            {"iterations_done", progress_.done()}};
  }

  nlohmann::json status_json() const {
    nlohmann::json j = run_brief();
    j["controller"] = address_;
    j["out_dir"] = o_.out_dir;
    j["start_ns"] = start_at_;
    j["agents"] = agents_json();
    j["bytes_sent"] = progress_.total_bytes_sent();
    j["throughput_bps"] = progress_.bytes_per_second() * 8;
    if (progress_.done() > 0) {
      const auto& last = progress_.job_iterations().back();
      j["last_iteration_ns"] = last.second - last.first;
    }
    if (failure_) j["error"] = failure_->message;
    return j;
  }

  void write_run_json() {
    nlohmann::json j = status_json();
    j["settings"] = to_json(o_.settings);
    j["settings"].erase("open_loop_offsets_ns");
    j["token"] = "(not stored)";
    nlohmann::json its = nlohmann::json::array();
    for (const auto& [s, e] : progress_.job_iterations()) its.push_back({s, e});
    j["iteration_times_ns"] = std::move(its);
    j["setup_ns"] = outcome_.setup_ns;
    j["time_scale"] = o_.time_scale;
    try {
      write_file_atomic(run_dir::run_file(o_.out_dir), j.dump(2) + "\n");
    } catch (const std::exception& e) {
      if (!failure_) failure_ = Failure{3, realtime_ns(), e.what()};
    }
  }

  std::string metrics() const {
    std::string m;
    const auto line = [&m](const std::string& s) { m += s + "\n"; };
    const std::string run = "run=\"" + o_.run_id + "\"";
    line("# HELP tensorwire_iterations_completed Iterations completed by every rank.");
    line("# TYPE tensorwire_iterations_completed counter");
    line("tensorwire_iterations_completed{" + run + "} " + std::to_string(progress_.done()));
    line("# HELP tensorwire_iterations_total Iterations the run replays.");
    line("# TYPE tensorwire_iterations_total gauge");
    line("tensorwire_iterations_total{" + run + "} " + std::to_string(progress_.iterations()));
    line("# HELP tensorwire_iteration_seconds Duration of the last completed iteration, job-wide.");
    line("# TYPE tensorwire_iteration_seconds gauge");
    if (progress_.done() > 0) {
      const auto& last = progress_.job_iterations().back();
      line("tensorwire_iteration_seconds{" + run + "} " + std::to_string(static_cast<double>(last.second - last.first) / 1e9));
    }
    line("# HELP tensorwire_flow_bytes_sent_total Bytes handed to the kernel per flow.");
    line("# TYPE tensorwire_flow_bytes_sent_total counter");
    for (std::size_t f = 0; f < p_.flows.size(); ++f) {
      line("tensorwire_flow_bytes_sent_total{" + run + ",flow=\"" + p_.flows[f].id + "\",src=\"" + std::to_string(p_.flows[f].src) +
           "\",dst=\"" + std::to_string(p_.flows[f].dst) + "\"} " + std::to_string(flow_bytes_[f]));
    }
    line("# HELP tensorwire_agents_connected Agents connected to the controller.");
    line("# TYPE tensorwire_agents_connected gauge");
    line("tensorwire_agents_connected{" + run + "} " + std::to_string(joined()));
    return m;
  }

  // ---- live output ----------------------------------------------------------------

  void publish_progress() {
    const Nanos now = realtime_ns();
    if (now - last_publish_ < 100 * kMilli && !progress_.finished()) return;
    last_publish_ = now;
    nlohmann::json j = {{"type", "progress"}, {"iterations_done", progress_.done()}, {"iterations", progress_.iterations()},
                        {"bytes_sent", progress_.total_bytes_sent()}, {"throughput_bps", progress_.bytes_per_second() * 8}};
    if (progress_.done() > 0) {
      const auto& last = progress_.job_iterations().back();
      j["last_iteration_ns"] = last.second - last.first;
    }
    for (const auto& f : feeds_) f->send(j);
  }

  void publish_status() {
    for (const auto& f : feeds_) f->send({{"type", "status"}, {"run", status_json()}});
  }

  void tick() {
    ticker_.expires_after(std::chrono::milliseconds(250));
    ticker_.async_wait([this](const error_code& ec) {
      if (ec) return;
      if (state_ != last_state_) {
        last_state_ = state_;
        publish_status();
      }
      draw_progress();
      tick();
    });
  }

  void draw_progress() {
    if (o_.quiet || state_ != "running") return;
    const std::uint64_t done = progress_.done(), total = progress_.iterations();
    std::string line = "[";
    const int width = 30;
    const int filled = total ? static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width) : 0;
    line += std::string(static_cast<std::size_t>(filled), '=') + std::string(static_cast<std::size_t>(width - filled), ' ') + "] ";
    line += std::to_string(done) + "/" + std::to_string(total) + " iterations";
    if (done > 0) {
      const auto& last = progress_.job_iterations().back();
      line += "  " + human_duration(last.second - last.first) + "/it  " + human_rate(progress_.bytes_per_second() * 8);
    }
    if (::isatty(2)) {
      std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
      drew_ = true;
    } else if (done / std::max<std::uint64_t>(1, total / 10) != last_tenth_) {
      last_tenth_ = done / std::max<std::uint64_t>(1, total / 10);
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }

  void end_progress_line() {
    if (drew_) std::fprintf(stderr, "\r\x1b[K");
  }

  // Warnings (rejected parties, agents turned away): printed even when quiet.
  void log(const std::string& m) {
    end_progress_line();
    std::fprintf(stderr, "tensorwire controller: %s\n", m.c_str());
  }

  const Profile& p_;
  const ControllerOptions& o_;
  Launcher& launcher_;
  asio::io_context ctx_{1};
  tcp::acceptor acceptor_;
  Notifier notifier_;
  asio::signal_set signals_;
  asio::steady_timer ticker_;
  asio::steady_timer resync_;
  RunProgress progress_;
  std::string token_;
  std::string address_;
  std::vector<std::shared_ptr<Session>> sessions_;
  std::vector<std::shared_ptr<Session>> feeds_;
  std::vector<std::uint64_t> flow_bytes_;
  std::optional<Failure> failure_;
  std::string state_ = "starting";
  std::string last_state_;
  bool assigned_ = false;
  bool stopping_all_ = false;
  bool drew_ = false;
  std::uint64_t last_tenth_ = ~std::uint64_t{0};
  std::uint64_t ping_seq_ = 0;
  Nanos start_at_ = 0;
  Nanos last_publish_ = 0;
  Nanos last_iteration_at_ = 0;
  RunOutcome outcome_;
};

}  // namespace

RunOutcome run_controller(const Profile& profile, const ControllerOptions& options, Launcher& launcher) {
  Controller c(profile, options, launcher);
  return c.run();
}

}  // namespace tw

#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/controller/agent_client.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "tensorwire/agent/agent.hpp"
#include "tensorwire/controller/control.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

class Client final : public AgentLink {
 public:
  explicit Client(const AgentClientOptions& o)
      : o_(o), ws_(ctx_), wakeup_(ctx_), flush_(ctx_), signals_(ctx_, SIGINT, SIGTERM) {}

  ~Client() override {
    stop_agent("the control client is ending");
    if (agent_thread_.joinable()) agent_thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
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
    asio::co_spawn(ctx_, session(), [this](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        give_up(ex.what());
      }
    });
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
  }

  void connected() override {
    asio::post(ctx_, [this] { send({{"type", "connected"}}); });
  }

  void iteration(std::uint32_t index, Nanos start, Nanos end,
                 const std::vector<std::pair<FlowIndex, std::uint64_t>>& flow_bytes) override {
    std::lock_guard lock(mutex_);
    batch_.push_back({index, start, end});
    flow_bytes_ = flow_bytes;
  }

 private:
  struct Outgoing {
    std::string text;       // a JSON message, or
    std::string file_path;  // a file: its header message, then its bytes in binary frames
    std::string file_name;
  };

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
    wakeup_.cancel();
    if (stdin_) stdin_->close(ignored);
    beast::get_lowest_layer(ws_).socket().close(ignored);
    ctx_.stop();
  }

  void stop_agent(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (steering_.stop) steering_.stop(why);
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

  void send(nlohmann::json j) {
    outbox_.push_back({j.dump(), {}, {}});
    wakeup_.cancel();
  }

  // ---- the session --------------------------------------------------------------

  asio::awaitable<void> session() {
    const auto [host, port] = split_host_port(o_.controller, "--controller");
    co_await connect(host, port);
    open_data_listener();
    asio::co_spawn(ctx_, writer(), asio::detached);
    nlohmann::json hello = {{"type", "hello"},        {"version", kControlVersion}, {"host", host_name()},
                            {"pid", ::getpid()},      {"data_host", data_host_},    {"data_port", data_port_}};
    if (o_.rank_hint) hello["rank_hint"] = *o_.rank_hint;
    send(hello);
    beast::flat_buffer buf;
    for (;;) {
      auto [ec, n] = co_await ws_.async_read(buf, kTuple);
      if (ec) {
        if (!bye_) give_up("lost the controller at " + o_.controller + ": " + ec.message());
        else shutdown();
        co_return;
      }
      if (!ws_.got_text()) {
        give_up("the controller sent an unexpected binary frame");
        co_return;
      }
      const Nanos received = realtime_ns();
      nlohmann::json m = parse_control_message(beast::buffers_to_string(buf.data()));
      buf.consume(buf.size());
      const std::string type = m["type"].get<std::string>();
      if (type == "ping") {
        send({{"type", "pong"}, {"seq", m.value("seq", 0)}, {"t", received}});
      } else if (type == "setup") {
        setup(m);
      } else if (type == "start") {
        const Nanos at = m.at("at").get<Nanos>();
        std::lock_guard lock(mutex_);
        if (steering_.start) steering_.start(at);
      } else if (type == "stop") {
        const std::string why = "stopped by the controller: " + m.value("reason", std::string("no reason given"));
        if (agent_running_) {
          stop_agent(why);
        } else {
          give_up(why);
          co_return;
        }
      } else if (type == "bye") {
        bye_ = true;
        error_code ignored;
        co_await ws_.async_close(websocket::close_code::normal, kTuple);
        shutdown();
        co_return;
      } else {
        give_up("the controller sent an unknown message \"" + type + "\"");
        co_return;
      }
    }
  }

  asio::awaitable<void> connect(const std::string& host, std::uint16_t port) {
    const Nanos deadline = realtime_ns() + o_.join_timeout;
    Nanos backoff = 50 * kMilli;
    std::string last = "no attempt";
    tcp::resolver resolver(ctx_);
    for (;;) {
      if (realtime_ns() > deadline) {
        throw std::runtime_error("cannot reach the controller at " + o_.controller + " within " +
                                 human_duration(o_.join_timeout) + " (" + last + ")");
      }
      auto [rec, results] = co_await resolver.async_resolve(host, std::to_string(port), kTuple);
      if (!rec) {
        auto& stream = beast::get_lowest_layer(ws_);
        stream.expires_after(std::chrono::seconds(2));
        auto [cec, ep] = co_await stream.async_connect(results, kTuple);
        if (!cec) {
          stream.expires_never();
          ws_.set_option(websocket::stream_base::timeout{std::chrono::seconds(5),
                                                         std::chrono::nanoseconds(kHeartbeatTimeout), true});
          ws_.set_option(websocket::stream_base::decorator([token = o_.token](websocket::request_type& req) {
            req.set(http::field::authorization, "Bearer " + token);
            req.set(http::field::user_agent, "tensorwire-agent");
          }));
          ws_.read_message_max(std::uint64_t{1} << 31);
          websocket::response_type res;
          const std::string authority = host + ":" + std::to_string(port);
          const std::string path = kAgentPath;
          auto [hec] = co_await ws_.async_handshake(res, authority, path, kTuple);
          if (!hec) co_return;
          if (res.result() == http::status::unauthorized) {
            throw std::runtime_error("the controller at " + o_.controller + " refused the token");
          }
          last = "handshake: " + hec.message();
          error_code ignored;
          stream.socket().close(ignored);
        } else {
          last = cec.message();
        }
      } else {
        last = rec.message();
      }
      asio::steady_timer pause(ctx_);
      pause.expires_after(std::chrono::nanoseconds(backoff));
      co_await pause.async_wait(kTuple);
      backoff = std::min<Nanos>(backoff * 2, kSecond);
    }
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
    if (host.empty()) host = beast::get_lowest_layer(ws_).socket().local_endpoint().address().to_string();
    tcp::acceptor a(ctx_);
    const tcp::endpoint ep(asio::ip::make_address(host), port);
    error_code ec;
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen for data flows on " + host + ":" + std::to_string(port) + ": " + ec.message());
    data_host_ = host;
    data_port_ = a.local_endpoint().port();
    listen_fd_ = a.release();
  }

  void setup(const nlohmann::json& m) {
    if (agent_running_) throw std::runtime_error("the controller sent a second setup");
    rank_ = m.at("rank").get<RankId>();
    run_id_ = m.at("run").get<std::string>();
    ProfileLoad load = load_profile_text(m.at("profile").get<std::string>(), "profile of run " + run_id_);
    if (!load.ok()) {
      throw std::runtime_error("the controller's profile does not load: " +
                               (load.diagnostics.empty() ? std::string("?") : load.diagnostics.front().str()));
    }
    profile_ = std::move(*load.profile);
    const RunSettings s = run_settings_from_json(m.at("settings"));
    Roster roster;
    roster.token = o_.token;
    for (const auto& e : m.at("roster")) {
      roster.ranks.push_back({e.at("rank").get<std::uint32_t>(), e.at("host").get<std::string>(), e.at("port").get<std::uint16_t>()});
    }
    if (o_.out_dir.empty()) {
      std::string tmpl = (std::filesystem::temp_directory_path() / "tensorwire-agent-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a directory for results in " + tmpl);
      out_dir_ = tmpl;
      remove_out_dir_ = true;
    } else {
      out_dir_ = o_.out_dir;
    }
    config_.rank = rank_;
    config_.profile_path = "run " + run_id_;
    config_.roster = std::move(roster);
    config_.out_dir = out_dir_;
    config_.executor = executor_options_for(s, m.value("slowdown", 1.0));
    config_.spin = s.spin;
    config_.delay = s.delay;
    if (m.contains("delay_from_ns")) config_.delay_from = m["delay_from_ns"].get<std::vector<Nanos>>();
    config_.connect_timeout = s.connect_timeout;
    config_.idle_timeout = s.idle_timeout;
    config_.listen_fd = UniqueFd(listen_fd_);
    listen_fd_ = -1;  // the agent owns it now
    config_.tx_timestamps = s.tx_timestamps;
    config_.quiet = o_.quiet;
    config_.link = this;
    agent_running_ = true;
    agent_thread_ = std::thread([this] {
      std::string error;
      try {
        run_agent(profile_, config_);
      } catch (const std::exception& e) {
        error = e.what();
      }
      asio::post(ctx_, [this, error] { agent_finished(error); });
    });
    flush_progress();
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
    std::vector<std::array<Nanos, 3>> batch;
    std::vector<std::pair<FlowIndex, std::uint64_t>> flows;
    {
      std::lock_guard lock(mutex_);
      batch.swap(batch_);
      flows = flow_bytes_;
    }
    if (batch.empty()) return;
    nlohmann::json its = nlohmann::json::array();
    for (const auto& b : batch) its.push_back({b[0], b[1], b[2]});
    nlohmann::json fl = nlohmann::json::array();
    for (const auto& [f, bytes] : flows) fl.push_back({f, bytes});
    send({{"type", "progress"}, {"iterations", std::move(its)}, {"flows", std::move(fl)}});
  }

  void agent_finished(const std::string& error) {
    agent_running_ = false;
    agent_ok_ = error.empty();
    flush_.cancel();
    send_progress();
    if (!error_.empty() && beast::get_lowest_layer(ws_).socket().is_open() == false) {
      shutdown();
      return;
    }
    nlohmann::json done = {{"type", "done"}, {"ok", error.empty()}};
    if (!error.empty()) {
      done["error"] = error;
      if (error_.empty()) log(error);
    }
    send(done);
    for (const std::string& path : {run_dir::summary_file(out_dir_, rank_), run_dir::records_file(out_dir_, rank_)}) {
      if (std::filesystem::exists(path)) {
        outbox_.push_back({{}, path, std::filesystem::path(path).filename().string()});
      }
    }
    send({{"type", "uploaded"}});
    if (!error_.empty() && !bye_) {
      // Lost the controller: nobody to upload to.
      shutdown();
    }
  }

  asio::awaitable<void> writer() {
    std::vector<char> chunk(1 << 20);
    for (;;) {
      while (outbox_.empty()) {
        wakeup_.expires_at(asio::steady_timer::time_point::max());
        auto [ec] = co_await wakeup_.async_wait(kTuple);
        if (!beast::get_lowest_layer(ws_).socket().is_open()) co_return;
        (void)ec;
      }
      Outgoing item = std::move(outbox_.front());
      outbox_.pop_front();
      if (item.file_path.empty()) {
        ws_.text(true);
        auto [ec, n] = co_await ws_.async_write(asio::buffer(item.text), kTuple);
        if (ec) co_return;
        continue;
      }
      std::ifstream in(item.file_path, std::ios::binary);
      const auto size = std::filesystem::file_size(item.file_path);
      ws_.text(true);
      const std::string header = nlohmann::json{{"type", "file"}, {"name", item.file_name}, {"size", size}}.dump();
      if (auto [ec, n] = co_await ws_.async_write(asio::buffer(header), kTuple); ec) co_return;
      std::uintmax_t left = size;
      ws_.binary(true);
      while (left > 0) {
        const auto want = static_cast<std::streamsize>(std::min<std::uintmax_t>(left, chunk.size()));
        in.read(chunk.data(), want);
        if (in.gcount() != want) {
          give_up(item.file_path + ": read failed during upload");
          co_return;
        }
        if (auto [ec, n] = co_await ws_.async_write(asio::buffer(chunk.data(), static_cast<std::size_t>(want)), kTuple); ec) {
          co_return;
        }
        left -= static_cast<std::uintmax_t>(want);
      }
    }
  }

  const AgentClientOptions& o_;
  asio::io_context ctx_{1};
  websocket::stream<beast::tcp_stream> ws_;
  asio::steady_timer wakeup_;
  asio::steady_timer flush_;
  asio::signal_set signals_;
  std::optional<asio::posix::stream_descriptor> stdin_;
  std::array<char, 64> stdin_buf_{};
  std::deque<Outgoing> outbox_;
  std::string data_host_;
  std::uint16_t data_port_ = 0;
  int listen_fd_ = -1;
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
  std::mutex mutex_;  // guards steering_, batch_, flow_bytes_ (shared with the agent's thread)
  AgentSteering steering_;
  std::vector<std::array<Nanos, 3>> batch_;
  std::vector<std::pair<FlowIndex, std::uint64_t>> flow_bytes_;
};

}  // namespace

int run_controlled_agent(const AgentClientOptions& options) {
  if (options.token.empty()) throw std::invalid_argument("an agent needs the run's token (--token, --token-stdin or TW_TOKEN)");
  Client client(options);
  return client.run();
}

}  // namespace tw

// One party's WebSocket at the controller: an agent's control connection or a
// dashboard's feed. It owns the stream, writes through an outbox (one write in
// flight), reads frames and hands each decoded control message to its handler,
// and says once why it ended. Works over any stream Beast's WebSocket takes
// (tcp_stream in production, beast::test::stream in tests).
//
// Controller thread only (the stream's executor). The session is held by
// shared_ptr by its reader and writer coroutines and by the run's list.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tensorwire/controller/clock_sync_round.hpp"
#include "tensorwire/controller/result_collector.hpp"
#include "tensorwire/net/outbox.hpp"
#include "tensorwire/net/task.hpp"
#include "tensorwire/protocol/control_messages.hpp"

namespace tw {

// What the controller knows of one agent (plain data).
struct AgentState {
  std::string peer;  // address:port it dialled from
  bool hello = false;  // said hello and was taken in
  bool turned_away = false;  // said hello and was told why it is no agent of this run
  std::string host;  // as the agent named itself
  long pid = 0;
  std::string data_host;  // where it listens for data flows
  std::uint16_t data_port = 0;
  std::optional<RankId> rank_hint;
  std::optional<RankId> rank;
  bool connected = false;
  bool done = false;
  bool ok = false;
  bool uploaded = false;
  std::string error;
  // "rank 2 (host, 127.0.0.1:4242, pid 17)"
  std::string who() const {
    std::string s = rank ? "rank " + std::to_string(*rank) : std::string("an agent");
    s += " (" + (host.empty() ? peer : host + ", " + peer) + (pid ? ", pid " + std::to_string(pid) : "") + ")";
    return s;
  }
};

// How a session ended.
enum class SessionEnd {
  closed,       // the peer closed the connection or it broke
  silent,       // no frame or heartbeat within the heartbeat timeout
  bad_message,  // a frame that is not a valid control message, or one the handler refused
  ended,        // the controller closed it
};

template <typename Stream>
class ControlSession : public ClockPeer, public std::enable_shared_from_this<ControlSession<Stream>> {
 public:
  using WebSocket = boost::beast::websocket::stream<Stream>;

  // What the run does with an agent's messages. Each may throw
  // std::runtime_error: the session then ends as bad_message with its text.
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual void on_message(ControlSession& s, const AgentMessage& m, Nanos received) = 0;
    virtual void on_data(ControlSession& s, std::string_view bytes) = 0;
    // Once, when the session ended; `why` is the reason of a bad_message.
    virtual void on_end(ControlSession& s, SessionEnd how, const std::string& why) = 0;
  };

  // `ws` has been accepted already. `heartbeat` is how long a silent peer is
  // waited for (pings go out after half of it).
  ControlSession(WebSocket ws, std::string peer, Nanos heartbeat = kHeartbeatTimeout,
                 std::uint64_t max_message = kMaxAgentMessage)
      : ws_(std::move(ws)), outbox_(ws_) {
    state.peer = std::move(peer);
    namespace websocket = boost::beast::websocket;
    ws_.set_option(websocket::stream_base::timeout{std::chrono::seconds(5), std::chrono::nanoseconds(heartbeat), true});
    ws_.read_message_max(max_message);
  }

  AgentState state;
  std::optional<ResultCollector> results;  // once it has a rank

  void send(const ControllerMessage& m) { outbox_.push_text(encode(m)); }
  void send_text(std::string text) { outbox_.push_text(std::move(text)); }
  bool closed() const { return closed_; }

  // ClockPeer
  void send_ping(std::uint64_t seq) override { send(control::Ping{seq}); }
  bool gone() const override { return closed_; }

  // Ends the session: no more writes, the connection closes, the reader ends
  // (its on_end says `ended` unless it had ended otherwise).
  void close() {
    if (closed_) return;
    closed_ = true;
    outbox_.close();
    boost::beast::get_lowest_layer(ws_).close();
  }

  // Ends the session once what is queued (an agent's bye) has been written: the
  // controller then stops sending (half-close) and reads until the peer closes,
  // which a heartbeat timeout bounds. close() still ends it at once.
  void finish() {
    if (closed_) return;
    outbox_.finish();
  }

  // An agent's connection: reads until it ends, then calls handler.on_end once.
  // `now` stamps each message's arrival (CLOCK_REALTIME; injected in tests).
  boost::asio::awaitable<void> run_agent(Handler& handler, std::function<Nanos()> now) {
    const auto [how, why] = co_await read_frames([&](const boost::beast::flat_buffer& buf) -> std::string {
      try {
        if (ws_.got_binary()) {
          handler.on_data(*this, boost::beast::buffers_to_string(buf.data()));
          return {};
        }
        const Nanos received = now();
        const auto decoded = decode_agent_message(boost::beast::buffers_to_string(buf.data()));
        if (!decoded) return "sent " + decoded.error;
        handler.on_message(*this, *decoded.message, received);
        return {};
      } catch (const std::exception& e) {
        return e.what();
      }
    });
    handler.on_end(*this, how, why);
  }

  // A dashboard's feed: what it sends is read and dropped; returns when it ends.
  boost::asio::awaitable<void> run_feed() {
    co_await read_frames([](const boost::beast::flat_buffer&) { return std::string(); });
  }

 private:
  // Starts the writer, then reads frames, each handed to on_frame (which returns
  // why the frame is refused, or ""), until the connection ends or a frame is
  // refused; the session is closed then. Returns how it ended and why.
  template <typename OnFrame>
  boost::asio::awaitable<std::pair<SessionEnd, std::string>> read_frames(OnFrame on_frame) {
    auto self = this->shared_from_this();
    start_writer();
    boost::beast::flat_buffer buf;
    constexpr auto tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
    for (;;) {
      auto [ec, n] = co_await ws_.async_read(buf, tuple);
      if (ec == boost::beast::websocket::error::message_too_big) {
        close();
        co_return std::pair{SessionEnd::bad_message, "sent a message larger than " + std::to_string(ws_.read_message_max()) + " bytes"};
      }
      if (ec) {
        const bool was_closed = closed_;
        close();
        if (outbox_.overflowed()) co_return std::pair{SessionEnd::closed, outbox_.overflow_text()};
        const SessionEnd how = was_closed ? SessionEnd::ended : ec == boost::beast::error::timeout ? SessionEnd::silent : SessionEnd::closed;
        co_return std::pair{how, ec.message()};
      }
      std::string why = on_frame(buf);
      buf.consume(buf.size());
      if (!why.empty()) {
        close();
        co_return std::pair{SessionEnd::bad_message, std::move(why)};
      }
    }
  }

  void start_writer() {
    auto self = this->shared_from_this();
    net::spawn_task(ws_.get_executor(), write_loop(self), [self](const std::string&) { self->close(); });
  }
  // A write that failed breaks the connection: the reader then sees its end and
  // reports it (closed, not ended: the controller did not ask for it).
  // After finish(), the connection is half-closed instead, so that what was
  // written is read before the peer sees the end.
  static boost::asio::awaitable<void> write_loop(std::shared_ptr<ControlSession> self) {
    const auto failure = co_await self->outbox_.run();
    if (self->closed_) co_return;
    auto& lowest = boost::beast::get_lowest_layer(self->ws_);
    if (self->outbox_.finishing() && !failure) {
      if constexpr (requires { lowest.socket(); }) {
        boost::system::error_code ignored;
        lowest.socket().shutdown(boost::asio::socket_base::shutdown_send, ignored);
        co_return;
      }
    }
    lowest.close();
  }

  WebSocket ws_;
  net::Outbox<WebSocket> outbox_;
  bool closed_ = false;
};

}  // namespace tw

// The controller's sessions and HTTP front door over Beast's in-memory test
// stream: no sockets, no sleeps. Each scenario runs with the controller's end
// failing at its n-th operation, n looped upward until the scenario completes,
// so that every failure path runs (under AddressSanitizer in the sanitizer build).
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "tensorwire/controller/agent_session.hpp"
#include "tensorwire/controller/http_router.hpp"

namespace tw {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using TestStream = beast::test::stream;
using Session = ControlSession<TestStream>;
using ClientWs = websocket::stream<TestStream>;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// A test's coroutines end with no exception; one that escapes fails the test loudly.
constexpr auto kRethrow = [](std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
};

// Records what the session hands the run; answers `uploaded` with `bye` as the
// controller does.
struct Recorder : Session::Handler {
  std::vector<AgentMessage> messages;
  std::string data;
  int ends = 0;
  SessionEnd how = SessionEnd::ended;
  std::string why;
  bool refuse_data = false;
  void on_message(Session& s, const AgentMessage& m, Nanos) override {
    messages.push_back(m);
    if (std::holds_alternative<control::Uploaded>(m)) s.send(control::Bye{});
  }
  void on_data(Session&, std::string_view bytes) override {
    if (refuse_data) throw std::runtime_error("sent binary data outside a file");
    data += bytes;
  }
  void on_end(Session&, SessionEnd h, const std::string& w) override {
    ++ends;
    how = h;
    why = w;
  }
};

struct Outcome {
  bool accepted = false;
  bool client_done = false;  // the client's script ran to its end
  std::string client_got;    // the last text the client read
};

// The controller's end: accepts the WebSocket, then runs a session over it.
asio::awaitable<void> controller_side(TestStream s, Recorder& r, Outcome& o, Nanos heartbeat) {
  websocket::stream<TestStream> ws(std::move(s));
  if (auto [ec] = co_await ws.async_accept(kTuple); ec) co_return;
  o.accepted = true;
  auto session = std::make_shared<Session>(std::move(ws), "127.0.0.1:9", heartbeat);
  co_await session->run_agent(r, [] { return Nanos{1000}; });
}

using Script = std::function<asio::awaitable<bool>(ClientWs&, Outcome&)>;

asio::awaitable<void> agent_side(TestStream s, Script script, Outcome& o) {
  ClientWs ws(std::move(s));
  if (auto [ec] = co_await ws.async_handshake("controller", kAgentPath, kTuple); ec) co_return;
  o.client_done = co_await script(ws, o);
  beast::get_lowest_layer(ws).close();
}

asio::awaitable<bool> write_text(ClientWs& ws, const std::string& text) {
  ws.text(true);
  auto [ec, n] = co_await ws.async_write(asio::buffer(text), kTuple);
  co_return !ec;
}

struct Attempt {
  Recorder r;
  Outcome o;
  std::size_t n = 0;  // the operation that failed first (none of them, in the complete run)
};

// Runs `script` against a session whose stream fails at operation `fail_at`
// (never, if none) until the io_context runs dry (at most 10 s).
Attempt run_once(const Script& script, const std::function<void(Recorder&)>& setup, std::optional<std::size_t> fail_at,
                 Nanos heartbeat) {
  asio::io_context ioc;
  std::optional<beast::test::fail_count> fc;
  if (fail_at) fc.emplace(*fail_at);
  TestStream controller_end = fc ? TestStream(ioc, *fc) : TestStream(ioc);
  TestStream agent_end(ioc);
  controller_end.connect(agent_end);
  Attempt run;
  run.n = fail_at.value_or(0);
  setup(run.r);
  asio::co_spawn(ioc, controller_side(std::move(controller_end), run.r, run.o, heartbeat), kRethrow);
  asio::co_spawn(ioc, agent_side(std::move(agent_end), script, run.o), kRethrow);
  ioc.run_for(std::chrono::seconds(10));
  EXPECT_TRUE(ioc.stopped()) << "n = " << run.n << ": a wait without an end";
  if (run.o.accepted) {
    EXPECT_EQ(run.r.ends, 1) << "n = " << run.n;
  }
  return run;
}

// Runs `script` against a session whose stream fails at operation n, for n =
// 0, 1, ... until `complete` holds; checks that each run ends exactly once and
// that no wait is left without an end. Returns the complete run.
Attempt run_until_it_completes(const Script& script, const std::function<void(Recorder&)>& setup,
                           const std::function<bool(const Attempt&)>& complete, Nanos heartbeat = kHeartbeatTimeout) {
  for (std::size_t n = 0; n < 200; ++n) {
    Attempt run = run_once(script, setup, n, heartbeat);
    if (complete(run)) {
      EXPECT_GT(n, 2u);  // failures at the early operations did run
      return run;
    }
  }
  ADD_FAILURE() << "the scenario never completed";
  return {};
}

TEST(ControlSession, AFullExchangeAndEveryFailureOnTheWay) {
  const Script script = [](ClientWs& ws, Outcome& o) -> asio::awaitable<bool> {
    control::Hello hello;
    hello.data_host = "127.0.0.1";
    hello.data_port = 17000;
    if (!co_await write_text(ws, encode(AgentMessage{hello}))) co_return false;
    if (!co_await write_text(ws, encode(AgentMessage{control::Pong{1, 5}}))) co_return false;
    ws.binary(true);
    const std::string bytes = "0123456789";
    if (auto [ec, n] = co_await ws.async_write(asio::buffer(bytes), kTuple); ec) co_return false;
    if (!co_await write_text(ws, encode(AgentMessage{control::Uploaded{}}))) co_return false;
    beast::flat_buffer buf;
    if (auto [ec, n] = co_await ws.async_read(buf, kTuple); ec) co_return false;
    o.client_got = beast::buffers_to_string(buf.data());
    auto [ec] = co_await ws.async_close(websocket::close_code::normal, kTuple);
    co_return !ec;
  };
  const Attempt run = run_until_it_completes(script, [](Recorder&) {}, [](const Attempt& x) { return x.o.client_done; });
  const Recorder& r = run.r;
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<control::Hello>(r.messages[0]));
  EXPECT_EQ(std::get<control::Pong>(r.messages[1]), (control::Pong{1, 5}));
  EXPECT_TRUE(std::holds_alternative<control::Uploaded>(r.messages[2]));
  EXPECT_EQ(r.data, "0123456789");
  EXPECT_EQ(run.o.client_got, R"({"type":"bye"})");
  EXPECT_EQ(r.how, SessionEnd::closed);  // the agent closed after bye
}

TEST(ControlSession, AMalformedMessageEndsTheSessionWithItsReason) {
  const Script script = [](ClientWs& ws, Outcome&) -> asio::awaitable<bool> {
    if (!co_await write_text(ws, "{\"type\":\"pong\"")) co_return false;
    beast::flat_buffer buf;
    auto [ec, n] = co_await ws.async_read(buf, kTuple);  // the controller closes
    co_return ec.failed();
  };
  const Attempt run = run_until_it_completes(script, [](Recorder&) {}, [](const Attempt& x) { return x.r.how == SessionEnd::bad_message; });
  EXPECT_TRUE(run.r.messages.empty());
  EXPECT_EQ(run.r.why, "sent a control message that is not JSON");
}

TEST(ControlSession, ARefusedMessageEndsTheSession) {
  const Script script = [](ClientWs& ws, Outcome&) -> asio::awaitable<bool> {
    ws.binary(true);
    const std::string bytes = "stray";
    if (auto [ec, n] = co_await ws.async_write(asio::buffer(bytes), kTuple); ec) co_return false;
    beast::flat_buffer buf;
    auto [ec, n] = co_await ws.async_read(buf, kTuple);
    co_return ec.failed();
  };
  const Attempt run = run_until_it_completes(
      script, [](Recorder& r) { r.refuse_data = true; }, [](const Attempt& x) { return x.r.how == SessionEnd::bad_message; });
  EXPECT_EQ(run.r.why, "sent binary data outside a file");
}

// A message over the limit ends the session as a bad message before it has been
// read whole: the controller holds at most the limit, whatever the peer claims.
TEST(ControlSession, AMessageOverTheLimitEndsTheSession) {
  const Script script = [](ClientWs& ws, Outcome&) -> asio::awaitable<bool> {
    ws.binary(true);
    const std::string piece(1 << 20, 'z');
    // One message in 1 MiB frames, beyond the limit.
    for (std::uint64_t sent = 0; sent <= kMaxAgentMessage; sent += piece.size()) {
      if (auto [ec, n] = co_await ws.async_write_some(false, asio::buffer(piece), kTuple); ec) co_return true;
    }
    beast::flat_buffer buf;
    auto [ec, n] = co_await ws.async_read(buf, kTuple);  // the controller closes
    co_return ec.failed();
  };
  // Many reads: too many to fail each in turn.
  const Attempt run = run_once(script, [](Recorder&) {}, std::nullopt, kHeartbeatTimeout);
  const Recorder& r = run.r;
  const Outcome& o = run.o;
  EXPECT_TRUE(o.client_done);  // it saw the controller close
  EXPECT_EQ(r.ends, 1);
  EXPECT_EQ(r.how, SessionEnd::bad_message);
  EXPECT_EQ(r.why, "sent a message larger than " + std::to_string(kMaxAgentMessage) + " bytes");
  EXPECT_TRUE(r.data.empty());
}

TEST(ControlSession, APeerThatClosesMidMessage) {
  const Script script = [](ClientWs& ws, Outcome&) -> asio::awaitable<bool> {
    ws.text(true);
    const std::string half = R"({"type":"hello","data_h)";
    // The first frame of a message that never ends.
    if (auto [ec, n] = co_await ws.async_write_some(false, asio::buffer(half), kTuple); ec) co_return false;
    co_return true;  // agent_side then drops the connection
  };
  const Attempt run = run_until_it_completes(script, [](Recorder&) {}, [](const Attempt& x) { return x.o.client_done && x.r.ends == 1; });
  EXPECT_TRUE(run.r.messages.empty());
  EXPECT_EQ(run.r.how, SessionEnd::closed);
}

// The heartbeat deadline: a peer that says nothing and answers no ping is gone
// after the heartbeat timeout (short here; the clock is the io_context's).
TEST(ControlSession, ASilentPeerMissesItsHeartbeat) {
  asio::io_context ioc;
  TestStream controller_end(ioc);
  TestStream agent_end(ioc);
  controller_end.connect(agent_end);
  Recorder r;
  Outcome o;
  asio::co_spawn(ioc, controller_side(std::move(controller_end), r, o, 40 * kMilli), kRethrow);
  // The agent: a handshake and a hello, then nothing at all.
  auto agent = [&]() -> asio::awaitable<void> {
    ClientWs ws(std::move(agent_end));
    if (auto [ec] = co_await ws.async_handshake("controller", kAgentPath, kTuple); ec) co_return;
    control::Hello hello;
    hello.data_host = "h";
    co_await write_text(ws, encode(AgentMessage{hello}));
    asio::steady_timer t(ioc);
    t.expires_after(std::chrono::seconds(3));
    co_await t.async_wait(kTuple);
  };
  asio::co_spawn(ioc, agent(), kRethrow);
  const auto t0 = std::chrono::steady_clock::now();
  while (r.ends == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) ioc.run_one_for(std::chrono::milliseconds(50));
  EXPECT_EQ(r.ends, 1);
  EXPECT_EQ(r.how, SessionEnd::silent);
  EXPECT_EQ(r.messages.size(), 1u);
  ioc.stop();
}

// ---- the HTTP front door --------------------------------------------------------

struct FakeApi {
  std::vector<std::string> rejections;
  int agents = 0;
  void rejected(const std::string& line) { rejections.push_back(line); }
  std::optional<HttpReply> page(const std::string& path) const {
    if (path == "/dashboard") return HttpReply{http::status::ok, "text/html", "<html>page</html>"};
    return std::nullopt;
  }
  HttpReply get(const std::string& path) {
    if (path == "/metrics") return {http::status::ok, "text/plain", "m\n"};
    return {http::status::not_found, "text/plain", "no such endpoint\n"};
  }
  asio::awaitable<void> agent(websocket::stream<TestStream>, std::string) {
    ++agents;
    co_return;
  }
  asio::awaitable<void> feed(websocket::stream<TestStream>, std::string) { co_return; }
};

// What a client reads back for `request`, with the server's stream failing at
// operation n; nullopt when it got no complete response.
std::optional<http::response<http::string_body>> ask(const std::string& request, std::size_t n, FakeApi& api, bool& complete) {
  asio::io_context ioc;
  beast::test::fail_count fc(n);
  TestStream server(ioc, fc);
  TestStream client(ioc);
  server.connect(client);
  server.append(request);  // the request has arrived
  std::optional<http::response<http::string_body>> got;
  const std::string token = "secret";  // outlives the coroutine, which holds it by reference
  asio::co_spawn(ioc, serve_http(std::move(server), std::string("10.0.0.9:4000"), token, api), kRethrow);
  auto read = [&]() -> asio::awaitable<void> {
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    if (auto [ec, n2] = co_await http::async_read(client, buf, res, kTuple); !ec) got = std::move(res);
  };
  asio::co_spawn(ioc, read(), kRethrow);
  ioc.run_for(std::chrono::seconds(10));
  EXPECT_TRUE(ioc.stopped());
  complete = got.has_value();
  return got;
}

TEST(HttpRouter, AStrangerGets401AndALogLine) {
  const std::string request = "GET /agent HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer wrong\r\nUpgrade: websocket\r\n"
                              "Connection: upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  for (std::size_t n = 0;; ++n) {
    ASSERT_LT(n, 50u);
    FakeApi api;
    bool complete = false;
    const auto res = ask(request, n, api, complete);
    EXPECT_EQ(api.agents, 0);
    EXPECT_LE(api.rejections.size(), 1u);
    if (!complete) continue;
    EXPECT_GT(n, 0u);
    EXPECT_EQ(res->result(), http::status::unauthorized);
    ASSERT_EQ(api.rejections.size(), 1u);
    EXPECT_EQ(api.rejections[0], "rejected a connection from 10.0.0.9:4000 to /agent: wrong or missing token");
    break;
  }
}

TEST(HttpRouter, TheTokenOpensTheApi) {
  FakeApi api;
  bool complete = false;
  auto res = ask("GET /metrics?token=secret HTTP/1.1\r\nHost: c\r\n\r\n", 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::ok);
  EXPECT_EQ(res->body(), "m\n");
  res = ask("POST /metrics HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer secret\r\nContent-Length: 0\r\n\r\n", 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::method_not_allowed);
  res = ask("GET /metrics HTTP/1.1\r\nHost: c\r\n\r\n", 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::unauthorized);
  EXPECT_EQ(api.rejections.back(), "rejected a request from 10.0.0.9:4000 to /metrics: wrong or missing token");
}

// Before the token is checked a request is held to a size: a 10 kB header gets
// 431 and a line in the log, a body over the limit 413; neither reaches the API.
TEST(HttpRouter, OversizedRequestsAreRefusedWithTheirStatus) {
  FakeApi api;
  bool complete = false;
  auto res = ask("GET /metrics HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer " + std::string(10'000, 'x') + "\r\n\r\n", 1000, api,
                 complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::request_header_fields_too_large);
  ASSERT_EQ(api.rejections.size(), 1u);
  EXPECT_EQ(api.rejections[0], "rejected a request from 10.0.0.9:4000: request headers too large");
  res = ask("POST /metrics HTTP/1.1\r\nHost: c\r\nContent-Length: 100000\r\n\r\n" + std::string(100'000, 'b'), 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::payload_too_large);
  // Within the limits, the same request is answered as usual.
  res = ask("GET /metrics HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer secret\r\n\r\n", 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::ok);
}

// A token in a malformed target (not after '?') is not the run's to accept, and
// the log line does not show it either; nor control bytes, nor a long path.
TEST(HttpRouter, TheLogLineHidesATokenInThePath) {
  FakeApi api;
  bool complete = false;
  const auto res = ask("GET /api/runs;token=secret&x=1 HTTP/1.1\r\nHost: c\r\n\r\n", 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::unauthorized);
  ASSERT_EQ(api.rejections.size(), 1u);
  EXPECT_EQ(api.rejections[0], "rejected a request from 10.0.0.9:4000 to /api/runs;token=<redacted>&x=1: wrong or missing token");
  EXPECT_EQ(loggable_path("/a\x1b[31mb"), "/a?[31mb");
  EXPECT_EQ(loggable_path("/token=abc"), "/token=<redacted>");
  const std::string shown = loggable_path("/" + std::string(5000, 'p'));
  EXPECT_EQ(shown.size(), 203u);
  EXPECT_TRUE(shown.ends_with("..."));
}

TEST(HttpRouter, OnlyTheStaticPageOpensWithoutTheToken) {
  FakeApi api;
  bool complete = false;
  auto res = ask("GET /dashboard HTTP/1.1\r\nHost: c\r\n\r\n", 1000, api, complete);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::ok);
  EXPECT_EQ(res->body(), "<html>page</html>");
  EXPECT_EQ((*res)[http::field::cache_control], "no-store");
  EXPECT_TRUE(api.rejections.empty());
  // Not another path, not another method, not a WebSocket on the page's path.
  for (const char* r : {"GET /dashboard/x HTTP/1.1\r\nHost: c\r\n\r\n", "GET /api/runs HTTP/1.1\r\nHost: c\r\n\r\n",
                        "POST /dashboard HTTP/1.1\r\nHost: c\r\nContent-Length: 0\r\n\r\n",
                        "GET /dashboard HTTP/1.1\r\nHost: c\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"}) {
    res = ask(r, 1000, api, complete);
    ASSERT_TRUE(res) << r;
    EXPECT_EQ(res->result(), http::status::unauthorized) << r;
  }
}

TEST(HttpRouter, BearerToken) {
  HttpRequest req;
  req.target("/api/feed?x=1&token=abc&y=2");
  EXPECT_EQ(bearer_token(req), "abc");
  EXPECT_EQ(request_path(req), "/api/feed");
  req.target("/api/feed?mytoken=abc");
  EXPECT_EQ(bearer_token(req), "");
  req.set(http::field::authorization, "Bearer t0k");
  EXPECT_EQ(bearer_token(req), "t0k");
}

}  // namespace
}  // namespace tw

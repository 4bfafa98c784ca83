// The outbox over Beast's in-memory test stream: what was queued before finish()
// is written before the writer ends (the controller's last bye to an agent was
// dropped when the session closed at once), and nothing after it.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include "tensorwire/net/outbox.hpp"

namespace tw {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using Ws = beast::websocket::stream<beast::test::stream>;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr auto kRethrow = [](std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
};

TEST(Outbox, FinishWritesWhatIsQueuedThenEnds) {
  asio::io_context ctx;
  beast::test::stream a(ctx), b(ctx);
  a.connect(b);
  Ws server(std::move(a)), client(std::move(b));
  std::vector<std::string> got;
  bool writer_ended = false;
  asio::co_spawn(ctx, [&]() -> asio::awaitable<void> {
    if (auto [ec] = co_await server.async_accept(kTuple); ec) co_return;
    net::Outbox<Ws> out(server);
    out.push_text("stop");
    out.push_text("bye");
    out.finish();
    out.push_text("after the end");  // dropped
    co_await out.run();
    writer_ended = true;
    beast::get_lowest_layer(server).close();
  }, kRethrow);
  asio::co_spawn(ctx, [&]() -> asio::awaitable<void> {
    if (auto [ec] = co_await client.async_handshake("controller", "/agent", kTuple); ec) co_return;
    for (;;) {
      beast::flat_buffer buf;
      auto [ec, n] = co_await client.async_read(buf, kTuple);
      if (ec) co_return;
      got.push_back(beast::buffers_to_string(buf.data()));
    }
  }, kRethrow);
  ctx.run();
  EXPECT_TRUE(writer_ended);
  EXPECT_EQ(got, (std::vector<std::string>{"stop", "bye"}));
}

TEST(Outbox, CloseEndsTheWriterWithoutWritingTheRest) {
  asio::io_context ctx;
  beast::test::stream a(ctx), b(ctx);
  a.connect(b);
  Ws server(std::move(a)), client(std::move(b));
  std::vector<std::string> got;
  asio::co_spawn(ctx, [&]() -> asio::awaitable<void> {
    if (auto [ec] = co_await server.async_accept(kTuple); ec) co_return;
    net::Outbox<Ws> out(server);
    out.push_text("never");
    out.close();
    co_await out.run();
    beast::get_lowest_layer(server).close();
  }, kRethrow);
  asio::co_spawn(ctx, [&]() -> asio::awaitable<void> {
    if (auto [ec] = co_await client.async_handshake("controller", "/agent", kTuple); ec) co_return;
    beast::flat_buffer buf;
    auto [ec, n] = co_await client.async_read(buf, kTuple);
    if (!ec) got.push_back(beast::buffers_to_string(buf.data()));
  }, kRethrow);
  ctx.run();
  EXPECT_TRUE(got.empty());
}

// A peer that reads nothing cannot make the queue grow without bound: the push
// that finds the bound reached closes the connection and drops the queue. One
// item of the bound or more (an agent's set-up) waits beside the rest uncounted;
// a second one overflows.
TEST(Outbox, AFullQueueClosesTheConnection) {
  asio::io_context ctx;
  beast::test::stream a(ctx), b(ctx);
  a.connect(b);
  Ws server(std::move(a));
  net::Outbox<Ws> out(server, 100);
  out.push_text(std::string(1000, 'x'));  // larger than the bound: waits uncounted
  EXPECT_FALSE(out.overflowed());
  EXPECT_EQ(out.queued_bytes(), 0u);
  for (int i = 0; i < 4; ++i) out.push_text(std::string(30, 'y'));  // 0, 30, 60, 90 queued before each
  EXPECT_FALSE(out.overflowed());
  EXPECT_EQ(out.queued_bytes(), 120u);
  out.push_text("one more");  // the bound is reached: the connection closes
  ASSERT_TRUE(out.overflowed());
  EXPECT_TRUE(out.closed());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(out.queued_bytes(), 0u);
  EXPECT_EQ(out.overflow_text(), "it read nothing while 100 bytes waited for it: closed");
  char c = 0;
  boost::system::error_code ec;
  EXPECT_EQ(b.read_some(asio::buffer(&c, 1), ec), 0u);  // the peer sees the end
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
  out.push_text("dropped");
  EXPECT_TRUE(out.empty());
  beast::test::stream a2(ctx), b2(ctx);
  a2.connect(b2);
  Ws server2(std::move(a2));
  net::Outbox<Ws> two(server2, 100);
  two.push_text(std::string(100, 'x'));
  EXPECT_FALSE(two.overflowed());
  two.push_text(std::string(100, 'x'));  // a second item of the bound
  EXPECT_TRUE(two.overflowed());
}

}  // namespace
}  // namespace tw

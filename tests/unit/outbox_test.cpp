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

}  // namespace
}  // namespace tw

// The deadline of one handshake step, on real loopback sockets: the guard closes
// a socket whose operation is still pending, and never one whose operation has
// completed, even when its timer expired in the same turn of the loop.
#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <array>
#include <chrono>
#include <optional>
#include <thread>

#include "within.hpp"

namespace tw {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

struct Pair {
  asio::io_context ctx;
  tcp::socket client{ctx};
  tcp::socket server{ctx};
  Pair() {
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client.connect(acceptor.local_endpoint());
    server = acceptor.accept();
  }
};

struct Outcome {
  error_code ec;
  bool open_afterwards = false;
};

// Reads 4 bytes from the client within `timeout`, sleeping `stall` before the
// read starts (a loop busy with other work); then waits `settle` and looks at the
// socket again, when any stray guard handler has run.
Outcome read_within(Pair& p, Nanos timeout, std::chrono::milliseconds stall, std::chrono::milliseconds settle) {
  std::optional<Outcome> out;
  asio::co_spawn(
      p.ctx,
      [&]() -> asio::awaitable<void> {
        std::array<char, 4> buf{};
        Outcome o;
        o.ec = co_await within(p.client, timeout, [&] {
          std::this_thread::sleep_for(stall);
          return asio::async_read(p.client, asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        });
        asio::steady_timer later(p.ctx);
        later.expires_after(settle);
        co_await later.async_wait(asio::use_awaitable);
        o.open_afterwards = p.client.is_open();
        out = o;
      },
      asio::detached);
  p.ctx.run();
  EXPECT_TRUE(out.has_value());
  return out.value_or(Outcome{});
}

TEST(Within, AnOperationThatCompletesInTimeKeepsItsSocket) {
  Pair p;
  asio::write(p.server, asio::buffer("abcd", 4));
  const Outcome o = read_within(p, 20 * kMilli, std::chrono::milliseconds(0), std::chrono::milliseconds(50));
  EXPECT_FALSE(o.ec) << o.ec.message();
  EXPECT_TRUE(o.open_afterwards) << "the guard closed a socket after its read had completed";
}

TEST(Within, AStalledOperationFailsAndItsSocketIsClosed) {
  Pair p;  // the server sends nothing
  const Outcome o = read_within(p, 20 * kMilli, std::chrono::milliseconds(0), std::chrono::milliseconds(1));
  EXPECT_EQ(o.ec, boost::asio::error::timed_out) << o.ec.message();
  EXPECT_FALSE(o.open_afterwards);
}

// The timer expires while the loop is busy, and the read completes at once when it
// starts (its data is there): both completions are ready in the same turn. Either
// the operation won (success, the socket stays open: the connection it belongs to
// has moved on) or the guard did (timed out, closed); never success with a socket
// that is closed then or later.
TEST(Within, ATimerExpiringAsTheOperationCompletesNeverClosesACompletedOne) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Pair p;
    asio::write(p.server, asio::buffer("abcd", 4));
    const Outcome o = read_within(p, 1 * kMilli, std::chrono::milliseconds(5), std::chrono::milliseconds(5));
    if (o.ec) {
      EXPECT_EQ(o.ec, asio::error::timed_out) << o.ec.message();
      EXPECT_FALSE(o.open_afterwards);
    } else {
      EXPECT_TRUE(o.open_afterwards) << "the read succeeded, then its guard closed the socket";
    }
  }
}

}  // namespace
}  // namespace tw

// The outgoing side of a WebSocket: one write in flight, the rest queued. Shared
// by the controller's sessions (agents and feeds) and the agent's control link.
// Items are text frames or files, whose bytes are read and sent in binary
// frames as they go (result files can be large).
//
// The queue is bounded: a push finding kMaxQueued bytes or more queued (a peer
// that does not read, such as a dashboard feed that answers pings and reads
// nothing) closes the connection instead, and later pushes are dropped; the
// reader then sees the end (overflowed() says why). One item of the bound or
// more may wait beside the rest (an agent's set-up), and is not counted; a
// second such item overflows. What is held is at most the bound plus one item.
//
// Works over any Beast WebSocket stream (tcp_stream in production, the test
// stream in tests). Not thread-safe: call it on the stream's executor only.
#pragma once

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

namespace tw::net {

template <typename WebSocket>
class Outbox {
 public:
  static constexpr std::size_t kMaxQueued = 64u << 20;

  explicit Outbox(WebSocket& ws, std::size_t max_queued = kMaxQueued) : ws_(ws), wakeup_(ws.get_executor()), max_queued_(max_queued) {}

  // Queues a text frame; dropped once closed.
  void push_text(std::string text) { push({std::move(text), {}}); }
  // Queues the bytes of a file, in binary frames of at most `chunk` bytes.
  void push_file(std::string path) { push({{}, std::move(path)}); }
  // The writer ends after the frame in flight; later pushes are dropped.
  void close() {
    closed_ = true;
    wakeup_.cancel();
  }
  // The writer ends once everything queued has been written (a goodbye must not
  // be dropped); later pushes are dropped.
  void finish() {
    finishing_ = true;
    wakeup_.cancel();
  }
  bool closed() const { return closed_; }
  bool finishing() const { return finishing_; }
  bool empty() const { return items_.empty(); }
  // The queue reached its bound and the connection was closed.
  bool overflowed() const { return overflowed_; }
  std::string overflow_text() const {
    const std::string bound = max_queued_ >= (1u << 20) ? std::to_string(max_queued_ >> 20) + " MiB" : std::to_string(max_queued_) + " bytes";
    return "it read nothing while " + bound + " waited for it: closed";
  }
  std::size_t queued_bytes() const { return queued_; }

  // Writes until close(), finish() and an empty queue, or a failed write (the
  // reader of the stream sees the connection's end and reports it). Returns a reason only for a local problem:
  // a file that could not be read.
  boost::asio::awaitable<std::optional<std::string>> run(std::size_t chunk = 1 << 20) {
    constexpr auto tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
    // For files only, made at the first: a controller has a session per agent,
    // and 256 buffers zeroed up front were 256 MiB and 65 000 page faults.
    std::unique_ptr<char[]> buf;
    while (!closed_) {
      if (items_.empty()) {
        if (finishing_) break;
        // Not a deadline: a wait for work, ended by push(), finish() or close().
        wakeup_.expires_at(boost::asio::steady_timer::time_point::max());
        co_await wakeup_.async_wait(tuple);
        continue;
      }
      Item item = std::move(items_.front());
      items_.pop_front();
      if (item.size() >= max_queued_) {
        big_queued_ = false;
      } else {
        queued_ -= item.size();
      }
      if (item.file.empty()) {
        ws_.text(true);
        if (auto [ec, n] = co_await ws_.async_write(boost::asio::buffer(item.text), tuple); ec) co_return std::nullopt;
        continue;
      }
      std::ifstream in(item.file, std::ios::binary);
      if (!in) co_return item.file + ": cannot open for upload";
      ws_.binary(true);
      if (!buf) buf = std::make_unique_for_overwrite<char[]>(chunk);
      for (;;) {
        in.read(buf.get(), static_cast<std::streamsize>(chunk));
        const auto got = static_cast<std::size_t>(in.gcount());
        if (got == 0) break;
        if (auto [ec, n] = co_await ws_.async_write(boost::asio::buffer(buf.get(), got), tuple); ec) co_return std::nullopt;
        if (in.eof()) break;
      }
      if (in.bad()) co_return item.file + ": read failed during upload";
    }
    co_return std::nullopt;
  }

 private:
  struct Item {
    std::string text;
    std::string file;
    std::size_t size() const { return text.size() + file.size(); }
  };
  void push(Item item) {
    if (closed_ || finishing_) return;
    const bool big = item.size() >= max_queued_;
    if (queued_ >= max_queued_ || (big && big_queued_)) {
      // The write in flight may never end (the peer's window stays shut):
      // closing the connection ends it, and the reader with it.
      overflowed_ = true;
      close();
      items_.clear();
      queued_ = 0;
      big_queued_ = false;
      boost::beast::get_lowest_layer(ws_).close();
      return;
    }
    if (big) {
      big_queued_ = true;
    } else {
      queued_ += item.size();
    }
    items_.push_back(std::move(item));
    wakeup_.cancel();
  }
  WebSocket& ws_;
  boost::asio::steady_timer wakeup_;
  std::size_t max_queued_;
  std::size_t queued_ = 0;   // of the items under the bound
  bool big_queued_ = false;  // an item of the bound or more waits
  std::deque<Item> items_;
  bool closed_ = false;
  bool finishing_ = false;
  bool overflowed_ = false;
};

}  // namespace tw::net

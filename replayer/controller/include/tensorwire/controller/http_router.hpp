// The controller's HTTP front door: one request per connection, held to a size
// (431 or 413 beyond), the run's token checked first (constant time), then the API (/api/runs, /metrics) or a
// WebSocket upgrade (/agent, /api/feed) handed to the run. Strangers get 401 and
// a line in the log naming them. Works over any stream Beast's HTTP takes.
// Controller thread only.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "tensorwire/net/admission.hpp"
#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/util/token.hpp"

namespace tw {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct HttpReply {
  boost::beast::http::status status = boost::beast::http::status::ok;
  std::string type;
  std::string body;
};

// The token a request presents: "Authorization: Bearer T", else "?token=T"
// (browsers cannot set headers on a WebSocket); "" when none (pure).
std::string bearer_token(const HttpRequest& req);

// The path of a request, without its query (pure).
std::string request_path(const HttpRequest& req);

// A path as the log may show it (pure): at most 200 characters, bytes outside
// printable ASCII as '?', and whatever follows "token=" up to the next '&' or
// ';' replaced, so that a token sent in a malformed target stays out of the log.
std::string loggable_path(std::string_view path);

// Before the token is checked a request is held to these: its request line and
// headers (431 beyond) and its body (413 beyond; the API takes GETs and upgrades).
inline constexpr std::uint32_t kMaxRequestHeader = 8 * 1024;
inline constexpr std::uint64_t kMaxRequestBody = 16 * 1024;

inline constexpr const char* kFeedPath = "/api/feed";

// Serves one connection. `Api` provides:
//   void rejected(const std::string& line);      a stranger, for the log
//   std::optional<HttpReply> page(const std::string& path);   a static page anyone
//                                                may GET (the dashboard: it holds no
//                                                run data), nullopt for every other path
//   HttpReply get(const std::string& path);      a GET of the API (404 for others)
//   awaitable<void> agent(WebSocket, std::string peer);   an accepted /agent
//   awaitable<void> feed(WebSocket, std::string peer);    an accepted /api/feed
// where WebSocket is boost::beast::websocket::stream<Stream>.
// `ticket` is the connection's slot among the unauthenticated ones: given up once
// the token has been checked.
template <typename Stream, typename Api>
boost::asio::awaitable<void> serve_http(Stream stream, std::string peer, const std::string& token, Api& api,
                                        net::Admission::Ticket ticket = {}) {
  namespace http = boost::beast::http;
  namespace websocket = boost::beast::websocket;
  constexpr auto tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
  // A whole request, its token included: agents and browsers send it at once, a
  // stranger that trickles it holds an unauthenticated slot no longer than this.
  constexpr auto kRequestTimeout = std::chrono::seconds(3);
  constexpr bool kTimed = requires { stream.expires_after(kRequestTimeout); };
  if constexpr (kTimed) stream.expires_after(kRequestTimeout);
  boost::beast::flat_buffer buf;
  http::request_parser<http::string_body> parser;
  parser.header_limit(kMaxRequestHeader);
  parser.body_limit(kMaxRequestBody);
  // (No string literal inside a co_await expression: GCC 12 miscompiles them.)
  HttpReply reply;
  HttpRequest req;
  std::optional<HttpReply> too_large, page;
  if (auto [ec, n] = co_await http::async_read(stream, buf, parser, tuple); ec) {
    if (ec == http::error::header_limit) {
      too_large = HttpReply{http::status::request_header_fields_too_large, "text/plain", "request headers too large\n"};
    } else if (ec == http::error::body_limit) {
      too_large = HttpReply{http::status::payload_too_large, "text/plain", "request body too large\n"};
    } else {
      co_return;
    }
    api.rejected("rejected a request from " + peer + ": " + too_large->body.substr(0, too_large->body.size() - 1));
  } else {
    req = parser.release();
  }
  const std::string path = request_path(req);
  if (!too_large && !websocket::is_upgrade(req) && req.method() == http::verb::get) page = api.page(path);
  if (too_large) {
    reply = std::move(*too_large);
  } else if (page) {
    reply = std::move(*page);
  } else if (!same_token(bearer_token(req), token)) {
    api.rejected("rejected " + std::string(websocket::is_upgrade(req) ? "a connection" : "a request") + " from " + peer + " to " +
                 loggable_path(path) + ": wrong or missing token");
    reply = {http::status::unauthorized, "text/plain", "a valid token is required\n"};
  } else if (ticket.release(); websocket::is_upgrade(req)) {
    // (The token checked out: the connection is no stranger's, and no flood may
    // close it to make room, mid-response or mid-session.)
    if (path == kAgentPath || path == kFeedPath) {
      if constexpr (kTimed) stream.expires_never();
      websocket::stream<Stream> ws(std::move(stream));
      ws.set_option(websocket::stream_base::timeout{kRequestTimeout, std::chrono::nanoseconds(kHeartbeatTimeout), true});
      if (auto [ec] = co_await ws.async_accept(req, tuple); ec) co_return;
      if (path == kAgentPath) {
        co_await api.agent(std::move(ws), std::move(peer));
      } else {
        co_await api.feed(std::move(ws), std::move(peer));
      }
      co_return;
    }
    reply = {http::status::not_found, "text/plain", "no such endpoint\n"};
  } else if (req.method() != http::verb::get) {
    reply = {http::status::method_not_allowed, "text/plain", "GET only\n"};
  } else {
    reply = api.get(path);
  }
  http::response<http::string_body> res{reply.status, req.version()};
  res.set(http::field::server, "tensorwire");
  res.set(http::field::content_type, reply.type);
  res.set(http::field::cache_control, "no-store");
  res.set("Referrer-Policy", "no-referrer");
  res.keep_alive(false);
  res.body() = std::move(reply.body);
  res.prepare_payload();
  co_await http::async_write(stream, res, tuple);
  if constexpr (requires { stream.socket(); }) {
    boost::system::error_code ignored;
    stream.socket().shutdown(std::remove_reference_t<decltype(stream.socket())>::shutdown_send, ignored);
  } else {
    stream.close();
  }
}

}  // namespace tw

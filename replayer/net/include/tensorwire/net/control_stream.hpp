// The control plane's byte stream: plain TCP, or TLS over TCP when the run asks
// for it (`run --tls-cert/--tls-key`, `agent --controller-ca`). One type for both,
// so that the controller's HTTP and WebSocket sessions and the agent's control
// link are the same code either way. It is an Asio AsyncStream that Beast's
// HTTP and WebSocket layers take as their next layer; timeouts (expires_after)
// and closing act on the TCP stream beneath, under TLS too.
// Single-threaded, like the beast::tcp_stream it wraps.
#pragma once

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace tw::net {

class ControlStream {
 public:
  using Tcp = boost::beast::tcp_stream;
  using Tls = boost::beast::ssl_stream<Tcp>;
  using executor_type = Tcp::executor_type;

  // Plain TCP when `tls` is null, else TLS with that context (which must outlive
  // the stream); the handshake is the caller's (async_handshake).
  ControlStream(Tcp tcp, boost::asio::ssl::context* tls) : tls_context_(tls), s_(make(std::move(tcp), tls)) {}
  explicit ControlStream(Tcp tcp) : ControlStream(std::move(tcp), nullptr) {}
  ControlStream(ControlStream&&) = default;  // not assignable: a TLS stream is not

  bool tls() const { return tls_context_ != nullptr; }
  executor_type get_executor() { return tcp().get_executor(); }

  // The TCP stream beneath: its timeouts, socket and close apply to the whole.
  Tcp& tcp() { return std::visit([](auto& s) -> Tcp& { return lowest(s); }, s_); }
  boost::asio::ip::tcp::socket& socket() { return tcp().socket(); }
  template <class Duration>
  void expires_after(Duration d) {
    tcp().expires_after(d);
  }
  void expires_never() { tcp().expires_never(); }
  void close() { tcp().close(); }

  template <class Endpoints, class Token>
  auto async_connect(const Endpoints& endpoints, Token&& token) {
    return tcp().async_connect(endpoints, std::forward<Token>(token));
  }

  // The TLS handshake (completes at once without error on plain TCP). The
  // OpenSSL session, for the peer's name to check, is native_handle().
  template <class Token>
  auto async_handshake(boost::asio::ssl::stream_base::handshake_type role, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this, role](auto handler) {
          if (auto* t = std::get_if<Tls>(&s_)) {
            t->async_handshake(role, std::move(handler));
          } else {
            boost::asio::post(get_executor(), boost::asio::append(std::move(handler), boost::system::error_code{}));
          }
        },
        token);
  }
  SSL* native_handle() {
    auto* t = std::get_if<Tls>(&s_);
    return t ? t->native_handle() : nullptr;
  }

  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) { std::visit([&](auto& s) { s.async_read_some(b, std::move(handler)); }, s_); }, token,
        buffers);
  }
  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) { std::visit([&](auto& s) { s.async_write_some(b, std::move(handler)); }, s_); }, token,
        buffers);
  }

  // Beast's customisation points: how a WebSocket closes and times out its
  // stream (a TLS close_notify first, then the socket).
  friend void beast_close_socket(ControlStream& s) { s.close(); }
  friend void teardown(boost::beast::role_type role, ControlStream& s, boost::system::error_code& ec) {
    std::visit(
        [&](auto& x) {
          using boost::beast::websocket::teardown;
          teardown(role, x, ec);
        },
        s.s_);
  }
  template <class Handler>
  friend void async_teardown(boost::beast::role_type role, ControlStream& s, Handler&& handler) {
    std::visit(
        [&](auto& x) {
          using boost::beast::websocket::async_teardown;
          async_teardown(role, x, std::forward<Handler>(handler));
        },
        s.s_);
  }

 private:
  static std::variant<Tcp, Tls> make(Tcp tcp, boost::asio::ssl::context* tls) {
    if (tls) return std::variant<Tcp, Tls>(std::in_place_type<Tls>, std::move(tcp), *tls);
    return std::variant<Tcp, Tls>(std::in_place_type<Tcp>, std::move(tcp));
  }
  static Tcp& lowest(Tcp& s) { return s; }
  static Tcp& lowest(Tls& s) { return s.next_layer(); }

  boost::asio::ssl::context* tls_context_;
  std::variant<Tcp, Tls> s_;
};

// TLS contexts for the control plane. Each throws std::runtime_error naming the
// file and OpenSSL's reason. TLS 1.2 at least.
// The controller's: its certificate chain and private key (PEM).
std::unique_ptr<boost::asio::ssl::context> tls_server_context(const std::string& cert_file, const std::string& key_file);
// An agent's: the certificates it trusts for the controller (PEM: a CA, or the
// controller's own self-signed certificate). The peer must present a chain to
// one of them, valid for the name or address the agent dialled (set_peer_name).
std::unique_ptr<boost::asio::ssl::context> tls_client_context(const std::string& ca_file);
// Before a client's handshake: the host name (SNI, and checked against the
// certificate's DNS names) or IP address (against its IP addresses) it dialled.
void set_peer_name(ControlStream& s, const std::string& host);
// A failed handshake's reason in words, with OpenSSL's verification result
// when that was the cause ("certificate verify failed: self-signed ...").
std::string tls_error_text(ControlStream& s, const boost::system::error_code& ec);

}  // namespace tw::net

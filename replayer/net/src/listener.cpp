#include "tensorwire/net/listener.hpp"

#include <sys/socket.h>

#include <boost/asio/ip/address.hpp>
#include <stdexcept>

namespace tw::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {
std::string prefixed(const std::string& who, const std::string& what) { return who.empty() ? what : who + ": " + what; }
}  // namespace

std::string endpoint_text(const tcp::endpoint& e) {
  const std::string a = e.address().to_string();
  return (e.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(e.port());
}

tcp::acceptor open_listener(asio::io_context& ctx, const tcp::endpoint& endpoint, const std::string& who) {
  tcp::acceptor a(ctx);
  error_code ec;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(prefixed(who, "cannot listen on " + endpoint_text(endpoint) + ": " + ec.message()));
  return a;
}

tcp::acceptor open_listener(asio::io_context& ctx, const std::string& host, std::uint16_t port, const std::string& who) {
  error_code ec;
  tcp::resolver resolver(ctx);
  const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    throw std::runtime_error(prefixed(who, "cannot resolve " + host + ": " + (ec ? ec.message() : "no address")));
  }
  return open_listener(ctx, results.begin()->endpoint(), who);
}

tcp::acceptor adopt_listener(asio::io_context& ctx, UniqueFd fd, const std::string& who) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    throw std::runtime_error(prefixed(who, "inherited listening socket: not a socket"));
  }
  tcp::acceptor a(ctx);
  error_code ec;
  a.assign(sa.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd.get(), ec);
  if (ec) throw std::runtime_error(prefixed(who, "inherited listening socket: " + ec.message()));
  fd.release();  // the acceptor owns it now
  return a;
}

}  // namespace tw::net

// Opening a TCP listener, once for the agent's data flows, the agent's control
// client and the controller: bind, SO_REUSEADDR, listen, and one error that says
// which address could not be used.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "tensorwire/util/unique_fd.hpp"

namespace tw::net {

// Listens on `endpoint` (port 0: the kernel's choice); throws std::runtime_error
// "cannot listen on HOST:PORT: reason", prefixed by `who` when not empty.
boost::asio::ip::tcp::acceptor open_listener(boost::asio::io_context& ctx, const boost::asio::ip::tcp::endpoint& endpoint,
                                             const std::string& who = "");

// The same, resolving `host` first (a name or an address).
boost::asio::ip::tcp::acceptor open_listener(boost::asio::io_context& ctx, const std::string& host, std::uint16_t port,
                                             const std::string& who = "");

// Takes over a listening socket handed down (e.g. by the agent's control client).
boost::asio::ip::tcp::acceptor adopt_listener(boost::asio::io_context& ctx, UniqueFd fd, const std::string& who = "");

// "host:port", or "[v6]:port".
std::string endpoint_text(const boost::asio::ip::tcp::endpoint& e);

}  // namespace tw::net

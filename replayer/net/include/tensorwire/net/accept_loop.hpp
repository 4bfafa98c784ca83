// The accept loop of every listener (the controller's, the agent's data flows'):
// takes connections until the acceptor closes, and survives running out of
// descriptors. When accept fails with EMFILE or ENFILE the pending connection
// stays in the backlog and the listener stays readable, so a plain loop spins at
// full CPU; this one gives up a reserve descriptor, accepts and closes the oldest
// pending connection with it (its peer sees the close and may retry), takes the
// reserve back, pauses 50 ms and waits for the next connection before accepting
// again (out of descriptors, accept fails even when no one waits). Other
// transient errors (no buffer memory) pause it too, only ECONNABORTED not.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tensorwire/net/admission.hpp"
#include "tensorwire/util/unique_fd.hpp"

namespace tw::net {

// One descriptor held back for the moment the process has none left.
class FdReserve {
 public:
  FdReserve() { restore(); }
  void release() { fd_.reset(); }
  void restore() {
    if (!fd_) fd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  bool held() const { return static_cast<bool>(fd_); }

 private:
  UniqueFd fd_;
};

// Whether `fd` is still the connection between `local` and `remote`.
inline bool same_connection(int fd, const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote) {
  boost::asio::ip::tcp::endpoint l, r;
  socklen_t ln = static_cast<socklen_t>(l.capacity());
  socklen_t rn = static_cast<socklen_t>(r.capacity());
  if (::getsockname(fd, l.data(), &ln) != 0 || ::getpeername(fd, r.data(), &rn) != 0) return false;
  l.resize(ln);
  r.resize(rn);
  return l == local && r == remote;
}

// A ticket for `sock` from `admission`, or nullopt once `sock` is closed because
// it is over a cap and nothing can make room. A connection admitted in the place
// of an older one has that one shut down (both ways: its reads end, its peer sees
// the close), not closed: its descriptor stays its owner's, who sees the end and
// closes it; and only while the descriptor is still that connection. `log` gets
// "refused WHAT from ADDR: why (N refused so far)" or "made room for WHAT from
// ADDR: closed the oldest ... (N closed so far)" for the 1st, 10th, 100th, ... of each.
template <typename Log>
std::optional<Admission::Ticket> admit_socket(Admission& admission, boost::asio::ip::tcp::socket& sock, const std::string& what, Log log) {
  boost::system::error_code ec, lec;
  const auto ep = sock.remote_endpoint(ec);
  const auto local = sock.local_endpoint(lec);
  const std::string source = ec ? "?" : ep.address().to_string();
  std::function<void()> evict;
  if (!ec && !lec) {
    evict = [fd = sock.native_handle(), local, ep] {
      if (same_connection(fd, local, ep)) ::shutdown(fd, SHUT_RDWR);
    };
  }
  std::string why;
  const std::uint64_t evicted = admission.evicted();
  auto ticket = admission.admit(source, &why, std::move(evict));
  if (!ticket) {
    if (log_refusal(admission.refused())) {
      log("refused " + what + " from " + source + ": " + why + " (" + std::to_string(admission.refused()) + " refused so far)");
    }
    sock.close(ec);
  } else if (admission.evicted() != evicted && log_refusal(admission.evicted())) {
    log("made room for " + what + " from " + source + ": " + why + " (" + std::to_string(admission.evicted()) + " closed so far)");
  }
  return ticket;
}

struct AcceptCounters {
  std::uint64_t accepted = 0;
  std::uint64_t out_of_descriptors = 0;  // accepts that failed with EMFILE or ENFILE
};

// Accepts until `acceptor` closes (or an accept is aborted). `on_socket(socket)`
// gets each connection; `log(line)` a line for the 1st, 10th, 100th, ... time the
// process ran out of descriptors.
template <typename OnSocket, typename Log>
boost::asio::awaitable<void> accept_connections(boost::asio::ip::tcp::acceptor& acceptor, OnSocket on_socket, Log log,
                                                AcceptCounters* counters = nullptr) {
  namespace asio = boost::asio;
  constexpr auto tuple = asio::as_tuple(asio::use_awaitable);
  AcceptCounters local;
  AcceptCounters& c = counters ? *counters : local;
  FdReserve reserve;
  asio::steady_timer pause(acceptor.get_executor());
  for (;;) {
    auto [ec, sock] = co_await acceptor.async_accept(tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (!ec) {
      ++c.accepted;
      on_socket(std::move(sock));
      continue;
    }
    if (ec == asio::error::connection_aborted) continue;
    if (ec.value() == EMFILE || ec.value() == ENFILE) {
      ++c.out_of_descriptors;
      reserve.release();
      const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) ::close(fd);
      reserve.restore();
      if (log_refusal(c.out_of_descriptors)) {
        log("out of file descriptors accepting a connection (" + ec.message() + "; " + std::to_string(c.out_of_descriptors) +
            " time(s)): closed the oldest waiting connection, pausing 50 ms");
      }
    }
    pause.expires_after(std::chrono::milliseconds(50));
    co_await pause.async_wait(tuple);
    // Out of descriptors, accept fails whether or not anyone waits: wait for
    // someone before trying again, so that an idle listener does not poll.
    if (ec.value() == EMFILE || ec.value() == ENFILE) {
      auto [wec] = co_await acceptor.async_wait(asio::ip::tcp::acceptor::wait_read, tuple);
      if (wec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    }
  }
}

}  // namespace tw::net

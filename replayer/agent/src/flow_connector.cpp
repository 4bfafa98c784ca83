#include "flow_connector.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <stdexcept>

#include "clock.hpp"
#include "within.hpp"
#include "tensorwire/util/tcp_congestion.hpp"
#include "tensorwire/util/token.hpp"
#include "tensorwire/core/frame.hpp"
#include "tensorwire/net/admission.hpp"
#include "tensorwire/net/listener.hpp"
#include "tensorwire/net/retry.hpp"

namespace tw {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr Nanos kConnectTimeout = 2 * kSecond;  // one attempt
// A peer sends its hello and token as soon as it is connected: a stranger that
// says nothing holds one of the few unauthenticated slots for at most this long.
constexpr Nanos kHelloTimeout = 2 * kSecond;
// A peer busy accepting others: at least this long, and as long as the dial's
// budget allows. Once the hello is out the answer is waited for, not dialled
// again: a peer slowed down by load (hundreds of agents on a few cores) may take
// the first connection after the dialler gave up on it and refuse the second
// as a duplicate.
constexpr Nanos kAcceptTimeout = 10 * kSecond;
constexpr Nanos kWriteTimeout = 5 * kSecond;  // a handshake is a few bytes: only a stalled peer takes longer

}  // namespace

std::string peer_text(const tcp::socket& s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? "?" : net::endpoint_text(ep);
}

std::string flow_text(const Profile& p, FlowIndex f) {
  const Flow& fl = p.flows[f];
  return "flow " + fl.id + " (rank " + std::to_string(fl.src) + " -> rank " + std::to_string(fl.dst) + ")";
}

FlowConnector::FlowConnector(const Profile& profile, const IndexMap& flows, const Roster& roster, RankId rank, std::uint64_t digest,
                             Log log, std::string congestion)
    : p_(profile),
      flows_(flows),
      roster_(roster),
      rank_(rank),
      digest_(digest),
      log_(std::move(log)),
      congestion_(std::move(congestion)),
      claimed_(profile.flows.size(), 0) {}

std::string FlowConnector::flow_text(FlowIndex f) const { return tw::flow_text(p_, f); }

asio::awaitable<tcp::socket> FlowConnector::dial(FlowIndex flow, std::chrono::steady_clock::time_point deadline, Nanos within_budget) {
  const RankId dst = p_.flows[flow].dst;
  const auto& e = roster_.ranks.at(dst);
  const std::string where = e.host + ":" + std::to_string(e.port);
  const std::string who = "rank " + std::to_string(rank_) + ": " + flow_text(flow) + ": ";
  const std::string hello = frame::encode_hello({flows_.to_global(flow), rank_, digest_, roster_.token});
  std::string last_error = "no attempt";
  auto ex = co_await asio::this_coro::executor;
  auto attempt = [&]() -> asio::awaitable<std::optional<tcp::socket>> {
    tcp::resolver resolver(ex);
    auto [rec, results] = co_await resolver.async_resolve(e.host, std::to_string(e.port), asio::as_tuple(asio::use_awaitable));
    if (rec) {
      last_error = rec.message();
      co_return std::nullopt;
    }
    tcp::socket sock(ex);
    error_code ec = asio::error::host_not_found;
    for (const auto& entry : results) {
      // The congestion control before the connection exists: set on a connected
      // socket, it would inherit state from the default's start (BBR leaves its
      // socket paced by the kernel, whatever the algorithm after it).
      sock.close(ec);
      sock.open(entry.endpoint().protocol(), ec);
      if (ec) break;
      if (!congestion_.empty()) {
        // The agent tried it on a socket before connecting anything (probe_congestion_control).
        if (auto why = set_congestion_control(sock.native_handle(), congestion_); !why.empty()) {
          throw std::runtime_error(who + "--congestion-control: " + why);
        }
      }
      ec = co_await within(sock, kConnectTimeout, [&] { return sock.async_connect(entry.endpoint(), asio::as_tuple(asio::use_awaitable)); });
      if (!ec) break;
    }
    if (ec) {
      last_error = ec.message();
      co_return std::nullopt;
    }
    sock.set_option(tcp::no_delay(true), ec);
    ec = co_await within(sock, kWriteTimeout, [&] { return asio::async_write(sock, asio::buffer(hello), asio::as_tuple(asio::use_awaitable)); });
    std::array<std::byte, frame::kAcceptSize> reply{};
    if (!ec) {
      const Nanos left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now()).count();
      ec = co_await within(sock, std::max(kAcceptTimeout, left), [&] {
        return asio::async_read(sock, asio::buffer(reply), asio::as_tuple(asio::use_awaitable));
      });
      if (ec) {
        last_error = "no answer to the handshake";
        co_return std::nullopt;
      }
    } else {
      last_error = ec.message();
      co_return std::nullopt;
    }
    const auto status = frame::decode_accept(reply);
    if (!status) throw std::runtime_error(who + where + " is not a tensorwire agent");
    if (*status != frame::AcceptStatus::ok) {
      throw std::runtime_error(who + "rank " + std::to_string(dst) + " at " + where +
                               " refused the connection: " + frame::accept_status_text(*status));
    }
    co_return std::optional<tcp::socket>(std::move(sock));
  };
  std::optional<tcp::socket> sock = co_await net::retry_until<tcp::socket>(deadline, attempt);
  if (!sock) {
    throw std::runtime_error(who + "cannot connect to rank " + std::to_string(dst) + " at " + where + " within " +
                             human_duration(within_budget) + " (" + last_error + ")");
  }
  co_return std::move(*sock);
}

void FlowConnector::rejected(const std::string& peer, const std::string& why) {
  if (net::log_refusal(++rejected_)) {
    log_("rejected a connection from " + peer + ": " + why + " (" + std::to_string(rejected_) + " so far)");
  }
}

asio::awaitable<std::optional<FlowIndex>> FlowConnector::answer(tcp::socket& sock, const std::function<void()>& accepted) {
  const std::string peer = peer_text(sock);
  std::array<std::byte, frame::kHelloFixedSize> fixed{};
  const Nanos hello_by = mono_now() + kHelloTimeout;  // for the hello and its token together
  error_code ec = co_await within(sock, kHelloTimeout, [&] { return asio::async_read(sock, asio::buffer(fixed), asio::as_tuple(asio::use_awaitable)); });
  if (ec) co_return std::nullopt;
  std::string why;
  const auto prefix = frame::decode_hello_prefix(fixed, &why);
  if (!prefix) {
    rejected(peer, why);
    co_return std::nullopt;
  }
  std::string token(prefix->token_size, '\0');
  if (prefix->token_size > 0) {
    ec = co_await within(sock, std::max<Nanos>(hello_by - mono_now(), 0), [&] { return asio::async_read(sock, asio::buffer(token), asio::as_tuple(asio::use_awaitable)); });
    if (ec) co_return std::nullopt;
  }
  const frame::Hello& h = prefix->hello;
  // The hello names the whole profile's flow; this rank's profile may be a slice.
  const std::optional<FlowIndex> flow = flows_.to_local(h.flow);
  frame::AcceptStatus status = frame::AcceptStatus::ok;
  if (!same_token(token, roster_.token)) {
    status = frame::AcceptStatus::bad_token;
  } else if (!flow || *flow >= p_.flows.size() || p_.flows[*flow].dst != rank_ || p_.flows[*flow].src != h.src) {
    status = frame::AcceptStatus::bad_flow;
  } else if (h.profile_digest != digest_) {
    status = frame::AcceptStatus::bad_profile;
  } else if (claimed_[*flow] != 0) {
    status = frame::AcceptStatus::duplicate;
  }
  if (status == frame::AcceptStatus::ok) {
    claimed_[*flow] = 1;  // before the answer's write, which yields to other hellos
    if (accepted) accepted();
  }
  const auto reply = frame::encode_accept(status);
  ec = co_await within(sock, kWriteTimeout, [&] { return asio::async_write(sock, asio::buffer(reply), asio::as_tuple(asio::use_awaitable)); });
  if (status != frame::AcceptStatus::ok) {
    rejected(peer, frame::accept_status_text(status));
    co_return std::nullopt;
  }
  if (ec) {
    claimed_[*flow] = 0;  // the peer was not told: its next try may have the flow
    co_return std::nullopt;
  }
  sock.set_option(tcp::no_delay(true), ec);
  if (!congestion_.empty() && congestion_control(sock.native_handle()) != congestion_) {
    // What matters is the sender's; the receiving side's only sends acknowledgements.
    if (auto why = set_congestion_control(sock.native_handle(), congestion_); !why.empty()) {
      log_("--congestion-control on the connection from " + peer + ": " + why);
    }
  }
  co_return flow;
}

}  // namespace tw

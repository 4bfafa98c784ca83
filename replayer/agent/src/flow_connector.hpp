// Opening one data flow: the sender dials the receiving rank and says Hello (flow,
// source rank, profile digest, run token); the receiver checks it and answers
// Accept with a status. Every read, write and connect on the way has a deadline,
// so a peer that stalls costs a few seconds, never the run. Coroutines on the
// agent's I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/profile_slice.hpp"
#include "tensorwire/protocol/roster.hpp"

namespace tw {

class FlowConnector {
 public:
  using Log = std::function<void(const std::string&)>;

  // `profile`, `flows` and `roster` must outlive the connector; `flows` maps the
  // profile's flows to the whole profile's, whose indices the hellos carry (the
  // profile may be a slice). `log` gets the refusals of connections dialled in.
  // `congestion`: each data socket's TCP congestion control; empty: the host's.
  FlowConnector(const Profile& profile, const IndexMap& flows, const Roster& roster, RankId rank, std::uint64_t digest, Log log,
                std::string congestion = {});

  // Dials the receiving rank of `flow` until it accepts or `deadline` passes,
  // retrying with backoff. Throws std::runtime_error naming the flow and the peer
  // when the peer refuses (wrong token, profile, ...), is not an agent, or cannot
  // be reached in time (`within` is the budget, for that message).
  boost::asio::awaitable<boost::asio::ip::tcp::socket> dial(FlowIndex flow, std::chrono::steady_clock::time_point deadline,
                                                            Nanos within);

  // Answers a connection dialled in: reads its Hello, answers Accept. Returns the
  // flow when accepted, nullopt when refused or when the peer stalls or leaves.
  // A flow is accepted once: the hello that checks out claims it before the
  // answer goes out (two hellos for one flow answered at once would both be
  // told yes, and the second connection would replace the first), and a claim
  // whose answer could not be written is given back for the peer's next try.
  // `accepted()` is called once the hello checks out, before the answer goes
  // out: from then on the peer takes the flow as connected, so nothing may close
  // the socket to make room for another (a stranger's flood: Admission). Throws
  // nothing expected.
  boost::asio::awaitable<std::optional<FlowIndex>> answer(boost::asio::ip::tcp::socket& sock,
                                                          const std::function<void()>& accepted = {});

 private:
  std::string flow_text(FlowIndex f) const;

  const Profile& p_;
  const IndexMap& flows_;
  const Roster& roster_;
  RankId rank_;
  std::uint64_t digest_;
  Log log_;
  std::string congestion_;
  // Connections turned away at the hello (garbage, a wrong token, a flow not
  // ours): a line for the 1st, 10th, 100th, ... so that a stranger cannot grow
  // the log a line per connection.
  std::uint64_t rejected_ = 0;
  void rejected(const std::string& peer, const std::string& why);
  std::vector<char> claimed_;  // per flow of the profile: a connection was accepted for it
};

// "flow ID (rank S -> rank D)", as errors name a flow.
std::string flow_text(const Profile& p, FlowIndex f);

// The peer's "address:port", or "?" when the socket has none.
std::string peer_text(const boost::asio::ip::tcp::socket& s);

}  // namespace tw

// What a profile asks of the network and the ranks, per iteration, and the fastest
// any replay of it could be on a given link rate.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

struct RankStats {
  Bytes sent = 0;  // per iteration
  Bytes received = 0;
  Nanos compute = 0;  // sum of compute durations (the mean over iterations of an op that has them)
  std::size_t compute_ops = 0;
  std::size_t send_ops = 0;
};

struct FlowStats {
  Bytes bytes = 0;  // per iteration
  std::size_t messages = 0;
};

struct ProfileStats {
  std::size_t compute_ops = 0;
  std::size_t send_ops = 0;
  std::size_t tensors = 0;  // entries of `tensors`, else distinct send labels
  Bytes bytes_per_iteration = 0;
  Bytes smallest_message = 0;
  Bytes largest_message = 0;
  std::vector<RankStats> ranks;
  std::vector<FlowStats> flows;
};

ProfileStats compute_stats(const Profile& profile);

// One rank's link, bits per second each way. On a real network it is the rank's
// NIC; on loopback there is no per-rank wire, and the rates that matter are what a
// rank's flows achieved together (see analysis/link_rates.hpp).
struct RankLink {
  double egress_bps = 0;
  double ingress_bps = 0;
};
using RankLinks = std::vector<RankLink>;  // [rank]

RankLinks uniform_links(std::size_t ranks, double bps);

// A lower bound on the iteration time when every rank has a full-duplex link
// (egress and ingress rates of its own) and nothing else costs time: the largest of
// the critical path of the DAG (a send takes bytes over the slower of its sender's
// egress and its receiver's ingress), any rank's total compute, and any rank's
// bytes out or in over its link. With the iteration barrier the run takes at least
// iterations x the iteration bound; without it, iterations may overlap, and the
// run bound is iterations x the largest per-rank resource total (or one critical
// path, if longer).
struct LowerBound {
  double link_bps = 0;  // the rate of every link; 0 when they differ
  Nanos iteration = 0;
  Nanos run = 0;
  Nanos critical_path = 0;
  Nanos max_compute = 0;
  Nanos max_egress = 0;
  Nanos max_ingress = 0;
  RankId compute_rank = 0, egress_rank = 0, ingress_rank = 0;
  std::string limited_by;  // "critical path", "compute on rank 2", "egress of rank 0", "ingress of rank 3"
  std::vector<OpIndex> critical_ops;  // the critical path, first op first
};

// Time to put `bytes` on a link of `link_bps`, rounded up to whole nanoseconds (0
// for no bytes, whatever the rate).
Nanos transfer_time(Bytes bytes, double link_bps);

// How long `send` (a send op of `profile`) occupies the network: its bytes over the
// slower of its sender's egress and its receiver's ingress.
Nanos message_time(const Profile& profile, const RankLinks& links, const Op& send);

// Requires a valid profile (acyclic). link_bps must be > 0.
LowerBound lower_bound(const Profile& profile, const ProfileStats& stats, double link_bps);

// The same with a link per rank. Throws std::invalid_argument when `links` does not
// have one entry per rank or a rank that sends (receives) has no egress (ingress) rate.
LowerBound lower_bound(const Profile& profile, const ProfileStats& stats, const RankLinks& links);

// The same with a rank's bytes taken at `totals` and each message on the critical
// path at `messages`: a bound on a measured run holds when `totals` are the
// fastest rates a rank's bytes moved at and `messages` the fastest any one
// message did, which are different rates wherever flows run side by side.
LowerBound lower_bound(const Profile& profile, const ProfileStats& stats, const RankLinks& totals, const RankLinks& messages);

nlohmann::json stats_json(const Profile& profile, const ProfileStats& stats, const LowerBound& bound);

}  // namespace tw

// The traffic profile: a training job's communication stripped of the framework.
// Ranks, the flows (persistent TCP connections) between them, and one iteration's
// DAG of compute and send ops, repeated `iterations` times. docs/profile-format.md
// is the reference for the YAML form and for the execution semantics below.
//
// Semantics, in short: an op starts `gap` after all its dependencies completed.
// A compute op holds its rank for `duration` (a rank computes one op at a time); a
// send op puts `bytes` on its flow (a flow sends one message at a time, in the order
// they became ready). A dependency names an op of the same rank (complete when that
// compute ended, or when that send's last byte was handed to the kernel) or, across
// ranks, the receipt of a message (`recv:ID`: its last byte arrived). With
// `iteration_barrier` (default) a rank starts iteration i+1 once all its ops of
// iteration i completed and all messages addressed to it in iteration i arrived;
// without it, every op waits only for its dependencies and its own previous
// instance. `@-K` references the op K iterations earlier.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensorwire/core/units.hpp"

namespace tw {

inline constexpr int kProfileVersion = 1;

using RankId = std::uint32_t;
using FlowIndex = std::uint32_t;
using OpIndex = std::uint32_t;

enum class Role : std::uint8_t { worker, server };
enum class OpType : std::uint8_t { compute, send };

const char* role_name(Role r);
const char* op_type_name(OpType t);

struct Metadata {
  std::string source;  // "synth", "capture" or "manual"
  std::string framework;
  std::string pattern;
  std::string model;
  std::string description;
  std::string created;  // ISO 8601, informative
  std::string generator;  // the command line that produced the file
};

struct Rank {
  RankId id = 0;
  std::string host;  // optional: where the original rank ran
  Role role = Role::worker;
};

struct Flow {
  std::string id;
  RankId src = 0;
  RankId dst = 0;
  // How long after its arrival the receiver reads a message at the soonest: a
  // rank that reads only inside its own calls (an MPI rank between calls) leaves
  // data in the kernel that long although it is waiting for nothing. A replay
  // hands each message to its rank no sooner than that after it arrived. 0: as
  // soon as it is read (a reader thread that waits for the data).
  Nanos read_lag = 0;
};

// A model tensor: lets send ops be attributed to the tensors they carry.
struct Tensor {
  std::string name;
  Bytes bytes = 0;
  std::string bucket;  // optional group label (a DDP bucket), usable as a send's `tensor`
  std::string dtype;
};

struct Dependency {
  OpIndex op = 0;
  bool recv = false;  // the receipt of message `op` rather than its sender-side completion
  std::uint32_t iterations_back = 0;  // 0: same iteration; K: the op K iterations earlier

  bool operator==(const Dependency&) const = default;
};

struct Op {
  std::string id;
  OpType type = OpType::compute;
  RankId rank = 0;  // for a send: its flow's source
  Nanos duration = 0;  // compute only
  // Compute only, optional: the duration in each iteration of the original job
  // (a profile built from a capture keeps them, so that a replay has the same
  // per-iteration jitter as the job: the slowest rank of each iteration sets its
  // time, and means alone lose that). Iteration i takes durations[i % size];
  // `duration` stays the op's typical value.
  std::vector<Nanos> durations;
  FlowIndex flow = 0;  // send only
  Bytes bytes = 0;  // send only
  std::string tensor;  // send only, optional: a tensor name or bucket label
  // Send only: among sends ready on the same flow, a lower priority goes first
  // (ties: the earlier planned start, then the profile's order). 0 by default, so
  // a profile without priorities keeps its first-ready, first-sent order.
  std::uint32_t priority = 0;
  std::string label;  // optional, for people
  Nanos gap = 0;
  std::vector<Nanos> gaps;  // optional: the gap in each iteration, as `durations`
  std::vector<Dependency> after;

  Nanos duration_in(std::uint64_t iteration) const {
    return durations.empty() ? duration : durations[iteration % durations.size()];
  }
  Nanos gap_in(std::uint64_t iteration) const { return gaps.empty() ? gap : gaps[iteration % gaps.size()]; }
  // What a bound over many iterations may take: the mean of `durations` (the
  // critical path is convex in the durations, so the mean iteration is at least
  // the path of the mean durations), else `duration`.
  Nanos mean_duration() const;
  Nanos mean_gap() const;
};

// Timings of the original job, kept for `compare`. Times are relative to the start
// of the job-wide iteration they belong to.
struct ObservedIteration {
  Nanos duration = 0;
  std::vector<Nanos> rank_durations;  // empty or one per rank
};
struct ObservedOp {
  OpIndex op = 0;
  std::uint32_t iteration = 0;
  Nanos start = 0;
  Nanos end = 0;
};
struct Observed {
  std::string source;
  std::vector<ObservedIteration> iterations;
  std::vector<ObservedOp> ops;  // inline and from the sidecar file, merged
  std::string ops_file;  // sidecar (CSV), relative to the profile; empty if none
};

// Lets maps keyed by std::string be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Profile {
  int version = kProfileVersion;
  Metadata metadata;
  std::uint64_t iterations = 1;
  bool iteration_barrier = true;
  std::vector<Rank> ranks;  // ranks[i].id == i after loading
  std::vector<Flow> flows;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  std::optional<Observed> observed;

  // Lookups by id; built by index() (the loader calls it).
  StringMap<OpIndex> op_by_id;
  StringMap<FlowIndex> flow_by_id;
  void index();
};

// Limits beyond which a value is taken as a mistake rather than a plan.
namespace limits {
inline constexpr std::uint64_t kMaxRanks = 65536;
inline constexpr std::uint64_t kMaxOps = 10'000'000;
inline constexpr std::uint64_t kMaxIterations = 10'000'000;
inline constexpr std::uint64_t kMaxPerIterationEntries = 50'000'000;  // all ops' `durations` and `gaps` together
inline constexpr Bytes kMaxMessageBytes = 64 * kGiB;
inline constexpr Nanos kMaxDuration = 3600 * kSecond;
inline constexpr std::uint32_t kMaxIterationsBack = 1000;
inline constexpr std::size_t kMaxIdLength = 256;
inline constexpr std::uint64_t kMaxPriority = 1'000'000'000;
}  // namespace limits

// Time dilation: the same profile with every compute duration and gap (and
// observed time) multiplied by `k`, so that a job recorded on a network k times
// faster keeps its shape on a slower one. Sizes are unchanged.
Profile time_scaled(const Profile& profile, double k);

}  // namespace tw

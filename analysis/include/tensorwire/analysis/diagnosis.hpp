// The diagnosis of a job from its measured timings: who is the straggler, which
// link is slow, what each costs the job end to end, the critical path, whether the
// job is compute- or communication-bound, and which tensor to compress.
// docs/analysis.md describes the method; in short:
//
// 1. Calibration. Every compute op instance keeps its measured duration. Every
//    flow gets a model fitted to its messages (graph_sim.hpp): the time a message
//    holds the flow (a cost per message plus its bytes at the flow's rate), fitted
//    to back-to-back messages, and the time from there to its receipt, fitted to
//    the others. Simulating that ("the job as measured") must reproduce the
//    measured iteration time; the error is reported, and named when above 10%.
// 2. What-if. The ideal job has every compute op at the median of its peers (the
//    same op of every rank of the same role and shape, over every iteration) and
//    every flow at its class's median model (worker to worker, worker to server,
//    server to worker). One cause at a time is put back to its measured timing:
//    a rank's compute, or a host pair's flows. Its impact is the simulated
//    iteration time with it minus the ideal's, the method of ByteDance's what-if
//    analysis of its training fleet. "Without it" is the measured job simulated
//    with only that cause brought to the ideal.
// 3. Critical path. From the simulation of the job as measured: the chain of
//    instances that set each iteration's end, walked back through what made each
//    one start (its last dependency, its busy rank or flow, the gap before it).
//
// Pure: works on a loaded profile and timeline; the CLI reads them.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tensorwire/analysis/graph_sim.hpp"
#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

// What a run measured of one flow beyond its messages' times (runs only: the
// transmit timestamps and TCP_INFO snapshots of the sender).
struct FlowEvidence {
  Nanos in_stack = -1;  // median time from the last byte handed to the kernel until it left for the wire
  // Of the time from a message's first write to its receipt, the share until its
  // last byte left for the wire (transmit timestamps); -1 unknown.
  double stack_share = -1;
  std::uint64_t retransmits = 0;  // segments over the run
  double rwnd_limited = -1;  // share of the sender's busy time limited by the receive window
  double sndbuf_limited = -1;  // by the send buffer
  std::uint32_t cwnd = 0;  // median congestion window, segments
  Nanos rtt = -1;  // median smoothed RTT
  bool known = false;
};

struct DiagnosisInput {
  Profile profile;
  Timeline measured;
  std::string source;  // "run runs/x", "capture cap-h1 cap-h2", "profile job.yaml"
  std::vector<std::string> hosts;  // per rank; empty or "" where unknown
  std::vector<FlowEvidence> evidence;  // per flow; empty when none
};

struct DiagnosisOptions {
  // Compression cost, nanoseconds per byte of the uncompressed tensor, split
  // between compressing at the sender and decompressing at the receiver.
  double compress_ns_per_byte = 0.25;
  std::vector<double> compress_factors{2, 4, 10};
  std::size_t compress_candidates = 24;  // tensors tried, most bytes first
  // A straggler or slow link is named when its impact is at least this share of
  // the ideal iteration time.
  double threshold = 0.10;
  std::size_t warmup = 1;  // iterations left out of every mean
  // Threads for the what-if simulations (each on its own copy of the graph);
  // 0: one per core, as many as fit in kWhatIfMemory. The results do not depend on it.
  unsigned threads = 0;
  // Told after each what-if of a stage ends (the stage's name, those done, its
  // count), one call at a time, from whichever thread ran it: for a progress line.
  std::function<void(const char* stage, std::size_t done, std::size_t total)> progress;
};
inline constexpr std::size_t kWhatIfMemory = std::size_t{4} << 30;
// Threads for `n` what-ifs of `each` bytes of memory: `asked` unless it is 0,
// else one per core, no more than n, as many as fit in kWhatIfMemory.
unsigned what_if_threads(unsigned asked, std::size_t n, std::size_t each);

struct FlowFit {
  double bps = 0;  // rate while the flow holds a message
  Nanos per_message = 0;
  Nanos latency = 0;  // last bit out -> handed to the receiver
  double path_bps = 0;  // the path after the sender (FlowModel::path_bps); 0: none
  std::size_t messages = 0;  // timed messages the fit used
  bool fitted = false;  // false: the class median was used
};

struct Straggler {
  RankId rank = 0;
  std::string host;
  double score = 0;  // 1 - fastest peer's compute / this rank's (0: as fast as the best, 0.5: twice as slow)
  Nanos compute = 0;  // mean per iteration
  Nanos peers_compute = 0;  // the median of its peers
  Nanos waited_on = 0;  // per iteration: time other ranks' ops waited with this rank's message the last to arrive
  Nanos impact = 0;  // per iteration: ideal with this rank as measured, minus the ideal
  Nanos without = 0;  // per iteration: the job simulated with only this rank brought to its peers' median
  bool named = false;
};

struct SlowLink {
  std::string a, b;  // hosts (or "rank N" where hosts are unknown), a < b
  std::vector<FlowIndex> flows;
  double rate_bps = 0;  // calibrated rate of its flows (bytes-weighted)
  double achieved_bps = 0;  // bytes over busy time, measured
  double peers_bps = 0;  // the median calibrated rate of the other flows of the same classes
  Nanos per_message = 0, peers_per_message = 0;
  Nanos latency = 0, peers_latency = 0;
  FlowEvidence evidence;  // worst of its flows
  Nanos impact = 0;
  Nanos without = 0;
  bool named = false;
};

struct PathOp {
  OpIndex op = 0;
  Nanos time = 0;  // per iteration on the path
  std::string kind;  // "compute", "network", "receipt", "gap"
};

struct CriticalPath {
  Nanos length = 0;  // mean per iteration
  Nanos compute = 0, network = 0, in_stack = 0, on_wire = 0, receipt = 0, gap = 0;  // per iteration; in_stack + on_wire == network when split
  bool split = false;  // network split into in-stack and on-wire from transmit timestamps
  std::vector<Nanos> rank_compute;  // per rank: its compute on the path
  std::vector<PathOp> top;  // the ops with most time on it
  std::vector<double> compute_share;  // per analysed iteration
};

struct Verdict {
  std::string bound;  // "compute" or "communication"
  double compute_share = 0;  // of the critical path
  double communication_share = 0;
  std::size_t iterations_compute = 0, iterations_communication = 0;
  Nanos no_network = 0;  // simulated iteration with messages taking no time
  Nanos no_compute = 0;  // with compute taking no time
};

struct Compression {
  std::string tensor;  // the send ops' tensor label, or the op id
  Bytes bytes = 0;  // per iteration
  std::size_t messages = 0;
  std::vector<Nanos> saving;  // per factor: measured-job simulation minus with it compressed (may be negative)
};

// The order hint: every send given its urgency (priority.hpp), simulated on the
// job as measured.
struct OrderHint {
  bool tried = false;  // false: no send, or a DAG without an order
  Nanos before = 0, after = 0;  // simulated iteration, now and with the priorities
  std::size_t changed = 0;  // sends whose priority differs from the profile's
  std::vector<std::uint32_t> priorities;  // per op
};

struct Diagnosis {
  std::string source;
  std::size_t iterations = 0;  // analysed (after warm-up)
  Nanos measured = 0;  // mean iteration time
  Nanos simulated = 0;  // the job as measured, simulated
  double sim_error = 0;  // (simulated - measured) / measured
  bool reproduces = false;  // |sim_error| <= 10%
  Nanos ideal = 0;
  std::vector<FlowFit> flows;
  std::vector<Straggler> stragglers;  // by impact, largest first
  std::vector<SlowLink> links;  // by impact, largest first
  CriticalPath path;
  Verdict verdict;
  std::vector<Compression> compression;  // by saving at compress_factors[1] (or the only one), largest first
  Nanos compression_model = 0;  // the compression what-ifs' base: the job on its fitted shared links, simulated
  OrderHint order;
  std::vector<double> factors;
  double compress_ns_per_byte = 0;
  double threshold = 0;
  std::vector<std::string> notes;
};

// Throws std::invalid_argument when the timeline has no timed iteration.
Diagnosis diagnose(const DiagnosisInput& input, const DiagnosisOptions& options = {});

// Per-flow models fitted to a timeline's messages (FlowFit.fitted false where a
// flow had too few timed messages).
std::vector<FlowFit> fit_flows(const Profile& profile, const Timeline& measured, std::size_t warmup);

// The critical path of a recorded simulation, over its iterations from `from`.
CriticalPath critical_path(const SimGraph& graph, const GraphSimRun& run, std::size_t from,
                           const std::vector<double>& stack_share = {});

std::string diagnosis_text(const Diagnosis& d, const Profile& profile);
nlohmann::json diagnosis_json(const Diagnosis& d, const Profile& profile);

}  // namespace tw

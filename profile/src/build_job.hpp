// The profile builder's view of a captured job, shared by its steps (ranks and
// connections, clocks, iterations, dependencies). Private to profile/.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/profile/build.hpp"

namespace tw::build {

inline constexpr std::int64_t kNoIteration = std::numeric_limits<std::int64_t>::min();

// The builder's statistics over iterations: the upper median (0 when empty), and
// the spread p90 - p10 (0 with fewer than two values).
Nanos upper_median(std::vector<Nanos> v);
Nanos spread(std::vector<Nanos> v);

struct RankInfo {
  std::size_t process = 0;  // index into the traces
  std::string how;          // "RANK=1", or "traffic"
  Role role = Role::worker;
  std::string role_how;     // "TW_ROLE", "traffic", ""
};

struct Ranks {
  std::vector<RankInfo> ranks;                      // by rank id
  std::vector<std::optional<RankId>> of_process;    // per trace
};

// Processes that are ranks: the launcher's rank variable when a process has one
// (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID, ...); when no
// process has one, every process with traffic to another traced process, by
// host and pid. A rank claimed by two processes (a forked helper inherits RANK) goes
// to the one that moved more bytes.
Ranks find_ranks(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a, std::vector<std::string>& warnings);

// One direction of a connection between two processes: its sending end.
struct Direction {
  std::size_t conn = 0;  // the sender's end, index into CaptureAnalysis::connections
  RankId src = 0, dst = 0;
  std::vector<std::size_t> messages;  // indices into CaptureAnalysis::messages, in stream order
  std::string use = "data";  // or why it is left out of the schedule
  bool store = false;        // to or from MASTER_PORT (PyTorch's rendezvous store, usually)
};

// Every direction that carried bytes, with the structural reasons to leave one
// out: "launcher" (an end that is not a rank), "untraced peer", "same rank".
// Directions between two ranks stay "data" until the iteration step leaves out
// those whose traffic does not follow the iterations ("store" when they are
// MASTER_PORT's, "irregular" otherwise).
std::vector<Direction> directions(const CaptureAnalysis& a, const Ranks& ranks);

// Roles from the traffic where the job did not name them (TW_ROLE): in a complete
// bipartite exchange (every worker with every server, workers not among
// themselves) with at least three workers and at most half as many servers, the
// smaller side are servers; everyone else is a worker.
void assign_roles(Ranks& ranks, const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a,
                  const std::vector<Direction>& dirs);

// Host clocks onto the clock of `reference`'s host (rank 0's), from the traffic
// itself: no byte is read before it was sent, so each message bounds the offset
// between its two hosts from one side. Shifts every time in `traces`.
std::vector<BuildReport::ClockLine> align_clocks(std::vector<ProcessTrace>& traces, const CaptureAnalysis& a,
                                                 std::size_t reference, std::vector<std::string>& warnings);

struct Iterations {
  std::string source;                 // "annotations" or "periodic traffic"
  std::vector<std::int64_t> numbers;  // the job iterations found, ascending
  std::vector<std::int64_t> of_message;  // per message: its job iteration, or kNoIteration
  std::size_t before_first = 0;  // data messages before the first iteration (set-up, warm-up)
};

// Per cut direction (`cut`, numbered by `shift`): while, in most iterations, its
// last message of an iteration was read after its receiver had sent its first
// message of the next, that message moves to the next iteration (`piece` += 1;
// at most 3 times). The cut had fallen after the sender's first transfer, as
// the sender waited longer after it than before it.
void move_late_ends(const CaptureAnalysis& a, const std::vector<Direction>& dirs, const std::vector<std::size_t>& cut,
                    const std::vector<std::optional<std::int64_t>>& shift, std::vector<std::vector<std::int64_t>>& piece);

// Messages of adjacent iterations that went out interleaved on one connection
// change places: where a piece's sizes differ from the connection's most common
// ones by as many surplus as missing messages (at most 4), the surplus among
// its last messages and the missing among the next piece's first, the surplus
// go to the next piece and the missing come from it, at up to 8 boundaries in a
// row until a piece comes out usual (else nothing moves; `piece` edited).
void unswap_boundaries(const CaptureAnalysis& a, const std::vector<Direction>& dirs, const std::vector<std::size_t>& cut,
                       std::vector<std::vector<std::int64_t>>& piece);

// Iterations from the job's annotations when every rank has them, else from the
// periodic structure of each rank's traffic (docs/profile-build.md). Throws when
// neither is found.
Iterations find_iterations(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a, const Ranks& ranks,
                           const std::vector<Direction>& dirs, std::vector<std::string>& warnings);

// Dependency inference over the used iterations, on plain times so that it can be
// tested on hand-made schedules. Index k runs over the used iterations.
struct SendTimes {
  RankId rank = 0;  // the sender
  RankId dst = 0;   // the receiver
  // [k]: first call entered; last call returned; the receipt the ops after it
  // wait for (docs/profile-build.md); the read that returned the last byte.
  std::vector<Nanos> ready, sent, received, read;
};
struct Inferred {
  std::vector<std::vector<Dependency>> after;  // per send: same-rank sends, or receipts (recv = true)
  std::vector<std::vector<Nanos>> wait;        // per send, [k]: ready minus its last dependency (or the rank's start)
  std::vector<std::vector<Nanos>> from;        // per send, [k]: when that last dependency completed
};
// `rank_start[r][k]`: when rank r could start iteration k (its previous
// iteration's last send returned and last message arrived). An edge d -> s holds
// when s never became ready before d completed, d was s's latest such event in
// at least a tenth of the iterations, and s's wait after d varied less than its
// wait after the rank's start. Ops are referenced by their index in
// `sends`.
Inferred infer_dependencies(const std::vector<SendTimes>& sends, const std::vector<std::vector<Nanos>>& rank_start);

}  // namespace tw::build

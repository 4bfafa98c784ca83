// `tensorwire profile build`: a traffic profile from the captures of a real job.
// The rules (ranks, roles, which connections are data, iterations, dependencies,
// compute time, observed timings) are documented in docs/profile-build.md. Pure:
// it reads the capture model of core/ and writes a Profile.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/trace.hpp"

namespace tw {

// One capture directory as read by read_capture_dir.
struct CaptureInput {
  std::string dir;
  std::vector<ProcessTrace> traces;
};

struct BuildOptions {
  // Detected iterations A..B-1 (the job's own numbers when annotated, else counted
  // from the first detected one); default: the longest run of steady iterations.
  std::optional<std::pair<std::int64_t, std::int64_t>> iterations;
  bool keep_control = false;  // keep connections that are not part of the per-iteration schedule
  Nanos compute_min = 20 * kMicro;  // a shorter wait before a send is the send's `gap`, not a compute op
  // Each compute op keeps its duration, each send its gap, in every used iteration
  // (`durations`, `gaps`), so that a replay has the job's per-iteration jitter;
  // false: only their typical values.
  bool per_iteration = true;
  std::string generator;  // the command line, for metadata.generator
};

// What the builder found, for people (text) and tests (JSON).
struct BuildReport {
  struct RankLine {
    RankId rank = 0;
    int pid = 0;
    std::string host, role, how;  // how: "RANK=1", "OMPI_COMM_WORLD_RANK=0", "traffic"
  };
  struct ConnectionLine {
    std::string local, remote;
    int pid = 0;
    std::string use;  // "data" or why it was left out: "store", "launcher", "untraced peer", "same rank", "irregular"
    Bytes bytes = 0;
    std::size_t messages = 0;
  };
  struct ClockLine {
    std::string host;
    Nanos offset = 0;        // subtracted from the host's times
    Nanos uncertainty = -1;  // half the width of the bound; -1: bounded on one side only
  };
  std::vector<RankLine> ranks;
  std::vector<ConnectionLine> connections;
  std::vector<ClockLine> clocks;
  std::string iteration_source;  // "annotations" or "periodic traffic"
  std::int64_t detected = 0;     // iterations found
  std::int64_t first_used = 0, used = 0;  // the job's numbers A, and how many from A
  std::vector<std::string> dropped;  // "iteration 0: warm-up (different messages)", ...
  std::size_t messages_per_iteration = 0;
  Bytes bytes_per_iteration = 0;
  std::size_t sends = 0, sends_with_dependencies = 0, compute_ops = 0;
  Nanos compute_per_iteration = 0;   // summed over ranks
  Nanos gap_spread_p50 = 0, gap_spread_p90 = 0;  // per send: p90 - p10 of its wait over the iterations
  // Flows whose receiver read no sooner than this after arrival (Flow::read_lag,
  // at least a microsecond), largest first.
  std::vector<std::pair<std::string, Nanos>> read_lags;
  std::vector<std::string> warnings;
};

struct BuiltProfile {
  Profile profile;
  BuildReport report;
};

// Throws std::runtime_error with one line saying what is missing (no traced
// process, no data connection between two ranks, no repeating iteration, an
// --iterations range outside what was found).
BuiltProfile build_profile(const std::vector<CaptureInput>& captures, const BuildOptions& options);

// A capture understood as a job, for views of it: its processes with their ranks,
// host clocks onto rank 0's (align_clocks), the wire tap of every directory on
// the same time line, messages, and each message's iteration as the builder
// finds them. What cannot be found is left out with a note rather than thrown:
// a capture of one process has no ranks, traffic without a period no iterations.
struct CaptureJob {
  std::vector<ProcessTrace> traces;  // times on rank 0's host clock
  CaptureAnalysis analysis;          // with the wire tap's times when there was one
  std::vector<std::optional<RankId>> rank_of_process;  // per trace
  std::vector<BuildReport::ClockLine> clocks;
  std::string iteration_source;  // "annotations", "periodic traffic", or "" when none was found
  std::vector<std::int64_t> iteration_of_message;  // per message: its job iteration, or -1
  bool wire = false;       // a wire tap's segments were read
  std::vector<std::string> notes;  // what was not found, and the builder's warnings
};
// Throws std::runtime_error naming the directory whose traces or wire files are
// unreadable, or that holds no traced process.
CaptureJob read_capture_job(const std::vector<std::string>& dirs, Nanos gap = 100 * kMicro);

// Reads each directory with read_capture_dir; throws std::runtime_error naming
// the directory or file that is not a readable capture.
std::vector<CaptureInput> read_captures(const std::vector<std::string>& dirs);

// True when `dir` holds the traces of a capture.
bool is_capture_dir(const std::string& dir);

// What to build again to get the profile that `generator` (a built profile's
// metadata.generator) names: its capture directories and its options. Empty dirs
// when it is not a `profile build` command line.
struct BuildCommand {
  std::vector<std::string> dirs;
  BuildOptions options;
};
BuildCommand parse_build_command(const std::string& generator);

// `profile build` keeps at most this many observed op rows inline; the rest go to
// a CSV sidecar.
inline constexpr std::size_t kInlineObservedOps = 20000;

std::string build_report_text(const BuildReport& r);
nlohmann::json build_report_json(const BuildReport& r);

}  // namespace tw

// `tensorwire compare`: a replay held against its original (observed timings,
// another run, or the profile's own plan). Errors are replay minus reference:
// relative (percent) for durations and rates, absolute for start offsets.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

struct ErrorStats {
  std::size_t n = 0;
  double mean = 0, p50 = 0, p95 = 0, p99 = 0, max_abs = 0;  // of the signed errors; max of |error|
};
ErrorStats error_stats(std::vector<double> errors);

struct MessageError {
  OpIndex op = 0;
  std::uint32_t iteration = 0;
  Nanos reference = 0, replay = 0;  // completion time (end - start)
  double error_pct = 0;
};

struct FlowError {
  FlowIndex flow = 0;
  double reference_bps = 0, replay_bps = 0, error_pct = 0;
};

struct EdgeDrift {
  OpIndex from = 0, to = 0;  // `to` waits for `from` (same iteration)
  Nanos reference_slack = 0, replay_slack = 0;  // to.start - from.end, medians over iterations
  Nanos drift = 0;  // replay - reference
};

struct Comparison {
  std::string reference_source, replay_source;
  std::size_t iterations = 0;  // compared
  std::vector<Nanos> reference_iteration, replay_iteration;  // job-wide
  ErrorStats iteration_pct;  // job-wide iteration time, percent
  std::vector<ErrorStats> rank_iteration_pct;  // per rank (empty if unknown)
  ErrorStats completion_pct;  // per message: end - start, percent
  ErrorStats start_offset_ns;  // per op instance: start within the iteration, absolute
  ErrorStats flow_rate_pct;
  std::vector<MessageError> worst_messages;  // by |error|, at most 10
  std::vector<FlowError> flows;  // worst first
  std::vector<EdgeDrift> drifted_edges;  // by |drift|, at most 10
  // When the reference is a model (a profile without observed timings): the
  // fastest any iteration could be, and what it is limited by; -1 otherwise.
  Nanos lower_bound_ns = -1;
  std::string lower_bound_basis;
  double median_iteration_error_pct() const { return iteration_pct.p50; }
};

Comparison compare_timelines(const Profile& profile, const Timeline& reference, const Timeline& replay);

nlohmann::json comparison_json(const Profile& profile, const Comparison& c);
std::string comparison_text(const Profile& profile, const Comparison& c);

}  // namespace tw

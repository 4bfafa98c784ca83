// Views of what tensorwire reads: a capture (one directory, or one per host), a
// run directory, a built profile's observed timings; and two of them side by
// side. docs/view.md says what each track shows.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorwire/capture/chrome_trace.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/profile/build.hpp"
#include "tensorwire/view/view.hpp"

namespace tw::view {

struct Selection {
  // The job's iterations A to B-1 (a capture: as annotated or as the builder
  // finds them; a run or profile: the replayed ones, from 0).
  std::optional<std::pair<std::int64_t, std::int64_t>> iterations;
  std::vector<RankId> ranks;  // empty: every rank (a capture: and its processes without one)
  std::vector<std::pair<RankId, RankId>> flows;  // sender, receiver; empty: every one
  // Counter tracks are thinned to about this many samples each.
  std::size_t counter_points = 2000;
  Nanos gap = 100 * kMicro;  // a capture's send calls closer than this are one message (as `trace show --gap-us`)
};

// Parses "A:B", "0,2,3" and "0-1,1-2"; throws std::invalid_argument naming the option.
std::pair<std::int64_t, std::int64_t> parse_iterations(const std::string& text);
std::vector<RankId> parse_ranks(const std::string& text);
std::vector<std::pair<RankId, RankId>> parse_flows(const std::string& text);

// Counts of what went in, for the metadata and for tests that compare them with
// `trace show` / `results check`.
struct ViewCounts {
  std::size_t messages = 0, receipts = 0, compute = 0, iterations = 0, dependencies = 0;
};

View view_of_capture(const CaptureJob& job, const std::vector<ImportedOp>& ops, const Selection& s, ViewCounts* counts = nullptr);
// Throws std::runtime_error naming the file that is missing or malformed.
View view_of_run(const std::string& dir, const Selection& s, ViewCounts* counts = nullptr);
// A profile's observed timings, iterations laid end to end from time 0; throws
// std::runtime_error when it has none.
View view_of_profile(const Profile& p, const std::string& path, const Selection& s, ViewCounts* counts = nullptr);

// What PATH is, by its contents: "capture", "run" or "profile"; throws
// std::runtime_error when it is none of them.
std::string source_kind(const std::string& path);
// The view of PATH (captures: one or more directories).
View view_of(const std::vector<std::string>& paths, const Selection& s, ViewCounts* counts = nullptr);

// `other` beside `into`: the processes of each named "LABEL: ...", `other`'s
// times moved so that its iteration (into's first + other_offset) begins where
// into's first iteration begins (a run of a profile built from iterations A..B
// of a capture: other_offset A), or, without iterations, where into starts.
void append_against(View& into, const std::string& into_label, View other, const std::string& label, std::int64_t other_offset = 0);

}  // namespace tw::view

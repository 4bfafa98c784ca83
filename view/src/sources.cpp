#include "tensorwire/view/sources.hpp"

#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/run_dir.hpp"

namespace tw::view {
namespace {

namespace fs = std::filesystem;

std::int64_t number(const std::string& opt, const std::string& s) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || v < 0) throw std::invalid_argument(opt + ": '" + s + "' is not a number from 0");
  return v;
}

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    const std::size_t j = s.find(c, i);
    out.push_back(s.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

RankId rank_number(const std::string& opt, const std::string& s) {
  const std::int64_t r = number(opt, s);
  if (r > std::numeric_limits<RankId>::max()) throw std::invalid_argument(opt + ": rank " + s + " is out of range");
  return static_cast<RankId>(r);
}

// About the trace: its metadata on a slice of a track of its own, for the
// protobuf file (the JSON file has it as "metadata" too).
void add_about(View& v, Nanos from, Nanos to) {
  const std::uint32_t t = v.add_track(0, "about this trace", TrackKind::slices);
  const SliceRef s = v.add_slice(t, from, std::max(from, to), v.intern("tensorwire view"), 0, v.intern("about"));
  for (const auto& [k, x] : v.metadata.items()) {
    if (x.is_number_integer()) {
      v.add_arg(s, k, x.get<std::int64_t>());
    } else if (x.is_string()) {
      v.add_arg(s, k, x.get<std::string>());
    } else {
      v.add_arg(s, k, x.dump());
    }
  }
}

Nanos last_time(const View& v) {
  Nanos t = 0;
  for (const Track& k : v.tracks) {
    for (const Slice& s : k.slices) t = std::max(t, s.end);
    if (!k.samples.empty()) t = std::max(t, k.samples.back().first);
  }
  return t;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> parse_iterations(const std::string& text) {
  const auto parts = split(text, ':');
  if (parts.size() != 2) throw std::invalid_argument("--iterations: '" + text + "' is not A:B");
  const std::int64_t a = number("--iterations", parts[0]), b = number("--iterations", parts[1]);
  if (b <= a) throw std::invalid_argument("--iterations: '" + text + "' is empty (B must be above A)");
  return {a, b};
}

std::vector<RankId> parse_ranks(const std::string& text) {
  std::vector<RankId> out;
  for (const std::string& s : split(text, ',')) out.push_back(rank_number("--ranks", s));
  return out;
}

std::vector<std::pair<RankId, RankId>> parse_flows(const std::string& text) {
  std::vector<std::pair<RankId, RankId>> out;
  for (const std::string& s : split(text, ',')) {
    const auto ab = split(s, '-');
    if (ab.size() != 2) throw std::invalid_argument("--flows: '" + s + "' is not SRC-DST (ranks)");
    out.emplace_back(rank_number("--flows", ab[0]), rank_number("--flows", ab[1]));
  }
  return out;
}

std::string source_kind(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (is_capture_dir(path)) return "capture";
    if (fs::exists(run_dir::run_file(path), ec) || fs::exists(run_dir::summary_file(path, 0), ec)) return "run";
    throw std::runtime_error(path + ": neither a capture (trace-PID.json) nor a run directory (run.json, rank-0.json)");
  }
  if (fs::is_regular_file(path, ec)) return "profile";
  const bool there = fs::exists(path, ec);
  if (ec) throw std::runtime_error(path + ": " + ec.message());  // a symbolic link's loop, a directory we may not search
  if (there) throw std::runtime_error(path + ": not a regular file or a directory");
  throw std::runtime_error(path + ": no such file or directory");
}

namespace {

// The smallest iteration number a view draws, and where it begins; nullopt
// when it draws no iteration.
std::optional<std::pair<std::int64_t, Nanos>> first_iteration(const View& v, std::optional<std::int64_t> number = std::nullopt) {
  std::optional<std::pair<std::int64_t, Nanos>> best;
  for (const Track& t : v.tracks) {
    for (const Slice& s : t.slices) {
      if (v.strings[s.category] != "iteration") continue;
      for (std::uint32_t a = s.args; a < s.args + s.nargs; ++a) {
        if (v.strings[v.args[a].key] != "iteration") continue;
        const std::int64_t n = v.args[a].value;
        if (number && n != *number) continue;
        if (!best || n < best->first || (n == best->first && s.begin < best->second)) best = std::make_pair(n, s.begin);
      }
    }
  }
  return best;
}

}  // namespace

View view_of(const std::vector<std::string>& paths, const Selection& s, ViewCounts* counts) {
  if (paths.empty()) throw std::invalid_argument("nothing to view");
  const std::string kind = source_kind(paths[0]);
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    if (source_kind(p) != kind || (kind != "capture" && paths.size() > 1)) {
      throw std::invalid_argument(p + ": only captures (one directory per host) are viewed together; --against puts two sources side by side");
    }
    std::error_code ec;
    if (!seen.insert(fs::weakly_canonical(p, ec).string()).second) throw std::invalid_argument(p + ": named twice");
  }
  View v;
  if (kind == "capture") {
    const CaptureJob job = read_capture_job(paths, s.gap);
    std::vector<ImportedOp> ops;
    for (const std::string& d : paths) {
      auto more = read_imported_ops(d);
      ops.insert(ops.end(), more.begin(), more.end());
    }
    v = view_of_capture(job, ops, s, counts);
  } else if (kind == "run") {
    v = view_of_run(paths[0], s, counts);
  } else {
    v = view_of_profile(load_profile_or_throw(paths[0]), paths[0], s, counts);
  }
  if (v.slice_count() == 0 && (s.iterations || !s.ranks.empty() || !s.flows.empty())) {
    throw std::invalid_argument(paths[0] + ": nothing is left to draw after --iterations, --ranks and --flows");
  }
  v.metadata["flows"] = v.flows.size();
  v.metadata["flows_not_drawn"] = v.unlinked;  // a receipt that ends before its send began, by the clocks' error
  v.metadata["flows_not_drawn_by_ns"] = v.unlinked_by;
  add_about(v, v.first_time(), last_time(v));
  return v;
}

void append_against(View& into, const std::string& into_label, View other, const std::string& label, std::int64_t other_offset) {
  // The first iteration of each at the same time (a capture's startup and
  // warm-up come before it), else their first times.
  Nanos shift = into.first_time() - other.first_time();
  if (const auto mine = first_iteration(into)) {
    if (const auto theirs = first_iteration(other, mine->first + other_offset)) shift = mine->second - theirs->second;
  }
  for (Process& p : into.processes) p.name = into_label + ": " + p.name;
  for (Track& t : into.tracks) {
    if (t.parent == 0) t.name = into_label + ": " + t.name;
  }
  into.metadata = {{into_label, into.metadata},
                   {label, other.metadata},
                   {"aligned", label + "'s iteration " + std::to_string(other_offset) + " after " + into_label + "'s first begins with it"}};
  into.absorb(std::move(other), label + ": ", shift);
}

}  // namespace tw::view

#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/analysis/sources.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {

namespace fs = std::filesystem;

std::string run_profile_path(const std::string& dir) {
  const std::string profile_path = run_dir::profile_file(dir);
  if (fs::exists(profile_path)) return profile_path;
  const fs::path summary = run_dir::summary_file(dir, 0);
  std::ifstream in(summary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!in || j.is_discarded() || !j.contains("profile") || !j["profile"].is_string()) {
    throw std::runtime_error(dir + ": no profile.yaml, and no rank-0.json naming the profile");
  }
  return j["profile"].get<std::string>();
}

std::vector<std::vector<Record>> load_run_records(const std::string& dir, const Profile& profile) {
  std::vector<std::vector<Record>> ranks;
  for (std::size_t r = 0; r < profile.ranks.size(); ++r) {
    const std::string path = run_dir::records_file(dir, static_cast<RankId>(r));
    if (!fs::exists(path)) throw std::runtime_error(dir + ": no records of rank " + std::to_string(r) + " (" + path + ")");
    ranks.push_back(read_records(path));
  }
  return ranks;
}

LoadedRun load_run(const std::string& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + ": not a run directory");
  LoadedRun run;
  run.dir = dir;
  run.profile = load_profile_or_throw(run_profile_path(dir));
  const std::vector<std::vector<Record>> ranks = load_run_records(dir, run.profile);
  run.timeline = timeline_from_records(run.profile, ranks, "run " + dir);
  // A time-dilated run is compared at the original's speed.
  std::ifstream rj(run_dir::run_file(dir));
  const nlohmann::json j = nlohmann::json::parse(rj, nullptr, false);
  if (rj && !j.is_discarded() && j.contains("time_scale") && j["time_scale"].is_number()) {
    const double k = j["time_scale"].get<double>();
    if (k > 0 && k != 1) {
      scale_timeline(run.timeline, 1.0 / k);
      run.timeline.source += " (time-scaled x" + nlohmann::json(k).dump() + ", scaled back)";
    }
  }
  return run;
}

namespace {

void check_same_ops(const Profile& a, const Profile& b, const std::string& what) {
  if (a.ops.size() != b.ops.size() || a.flows.size() != b.flows.size()) {
    throw std::runtime_error(what + " does not replay the same profile (" + std::to_string(a.ops.size()) + " vs " +
                             std::to_string(b.ops.size()) + " ops)");
  }
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    if (a.ops[i].id != b.ops[i].id) throw std::runtime_error(what + " does not replay the same profile (op " + a.ops[i].id + " vs " + b.ops[i].id + ")");
  }
}

}  // namespace

CompareResult compare_with_profile(const Profile& original, const LoadedRun& replay) {
  check_same_ops(original, replay.profile, replay.dir);
  CompareResult r;
  r.profile = original;
  if (original.observed && (!original.observed->iterations.empty() || !original.observed->ops.empty())) {
    r.comparison = compare_timelines(original, timeline_from_observed(original), replay.timeline);
    return r;
  }
  // No observed timings: the plan. The link rate is the fastest flow's rate in the replay.
  double rate = 0;
  for (std::size_t f = 0; f < original.flows.size(); ++f) rate = std::max(rate, flow_rate_bps(replay.timeline, static_cast<FlowIndex>(f)));
  Nanos bound = -1;
  if (rate > 0) {
    const LowerBound lb = lower_bound(original, compute_stats(original), rate);
    bound = lb.iteration;
    r.note = "iteration time against the profile's lower bound " + human_duration(bound) + " at the measured link rate " +
             human_rate(rate) + " (" + lb.limited_by + "); op starts against their planned starts";
  }
  r.comparison = compare_timelines(original, timeline_from_plan(replay.timeline, bound), replay.timeline);
  return r;
}

CompareResult compare_original(const std::string& original, const std::string& replay_dir) {
  const LoadedRun replay = load_run(replay_dir);
  if (fs::is_directory(original)) {
    const LoadedRun ref = load_run(original);
    check_same_ops(ref.profile, replay.profile, replay_dir);
    CompareResult r;
    r.profile = ref.profile;
    r.comparison = compare_timelines(ref.profile, ref.timeline, replay.timeline);
    return r;
  }
  return compare_with_profile(load_profile_or_throw(original), replay);
}

}  // namespace tw

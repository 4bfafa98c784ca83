#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/analysis/sources.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorwire/analysis/link_rates.hpp"
#include "tensorwire/analysis/simulator.hpp"
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
  // No observed timings: the reference is the timing model, the profile simulated
  // with each rank's link at the rate it achieved in this replay; the lower bound
  // takes each rank's fastest rate, so no iteration of this replay can beat it.
  const MeasuredLinks links = measure_links(original, replay.timeline);
  if (!links.known || replay.timeline.iterations == 0) {
    r.comparison = compare_timelines(original, timeline_from_plan(replay.timeline, -1), replay.timeline);
    r.note = "the replay timed no message, so there is no link rate to model it at: op starts against their planned starts only";
    return r;
  }
  Profile model = original;
  model.iterations = replay.timeline.iterations;
  model.observed.reset();
  SimOptions o;
  o.links = links.busy;
  const std::string rates = links_summary(links.busy);
  const Timeline reference =
      timeline_from_simulation(model, simulate(model, o), "the timing model at the replay's measured link rates (" + rates + ")");
  r.comparison = compare_timelines(original, reference, replay.timeline);
  const LowerBound lb = lower_bound(original, compute_stats(original), links.peak, links.message);
  r.comparison.lower_bound_ns = lb.iteration;
  r.comparison.lower_bound_basis = lb.limited_by + "; a rank's bytes at its fastest iteration's rate, " + links_summary(links.peak) +
                                   ", each message at its ranks' fastest message's, " + links_summary(links.message);
  r.note =
      "the timing model simulates the profile with each rank's link at the rate its messages achieved together while in flight "
      "(on loopback a rank has no link of its own: the rate is its flows' aggregate, and the model shares it among them); "
      "the lower bound takes the fastest rates the replay reached instead, so no iteration of it can beat the bound";
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

#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/analysis/sources.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorwire/analysis/link_rates.hpp"
#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"

namespace tw {

namespace fs = std::filesystem;

std::string run_profile_path(const std::string& dir) {
  const std::string profile_path = run_dir::profile_file(dir);
  if (fs::exists(profile_path)) return profile_path;
  // A replay by hand: its agents' summaries name the profile they were given,
  // relative to the run directory unless absolute (the loader then takes only a
  // regular file of a sane size).
  const std::string summary = run_dir::summary_file(dir, 0);
  if (!fs::exists(summary)) throw std::runtime_error(dir + ": no profile.yaml, and no rank-0.json naming the profile");
  const std::string named = json_string(run_dir::read_summary(dir, 0), "profile", summary);
  if (named.empty() || named.starts_with("run ")) throw std::runtime_error(dir + ": no profile.yaml, and " + summary + " names no profile file");
  return path_named_by(summary, named);
}

Profile load_run_profile(const std::string& dir) {
  const std::string path = run_profile_path(dir);
  if (path == run_dir::profile_file(dir)) return load_profile_or_throw(path);
  if (!fs::exists(path)) {
    throw std::runtime_error(run_dir::summary_file(dir, 0) + " names " + path + " as the run's profile, which is missing (moved? copy it to " + run_dir::profile_file(dir) + ")");
  }
  try {
    return load_profile_or_throw(path);
  } catch (const std::exception&) {
    throw std::runtime_error(run_dir::summary_file(dir, 0) + " names " + path +
                             " as the run's profile, which does not load as one (`tensorwire profile validate " + path + "` says why)");
  }
}

std::string run_failure(const std::string& dir) {
  // The controller's account says whether the run failed, every rank's summary
  // merged into it.
  if (fs::exists(run_dir::run_file(dir))) return json_string(run_dir::read_run(dir), "error", run_dir::run_file(dir), "");
  // A failed `replay --local`, or agents by hand, leave no run.json: only their
  // summaries say it, and their records read as a replay that ran. The ranks
  // from 0 up to the first without a summary: a directory reused by a run of
  // fewer ranks keeps the summaries of the ranks beyond.
  for (RankId r = 0; r < limits::kMaxRanks && fs::exists(run_dir::summary_file(dir, r)); ++r) {
    const nlohmann::json s = run_dir::read_summary(dir, r);
    if (!s.value("finished", false)) {
      const std::string why = s.contains("error") && s["error"].is_string() ? s["error"].get<std::string>() : "";
      return "rank " + std::to_string(r) + " did not finish: " + (why.empty() ? std::string("no reason recorded") : why);
    }
  }
  return "";
}

namespace {

// From the earliest start to the latest end the ranks' summaries give, a minute
// either side; nothing when none gives them.
std::optional<std::pair<Nanos, Nanos>> run_span(const std::string& dir, std::size_t ranks) {
  Nanos lo = std::numeric_limits<Nanos>::max(), hi = std::numeric_limits<Nanos>::min();
  for (std::size_t r = 0; r < ranks; ++r) {
    if (!std::filesystem::exists(run_dir::summary_file(dir, static_cast<RankId>(r)))) continue;
    const nlohmann::json j = run_dir::read_summary(dir, static_cast<RankId>(r));
    if (!j.contains("start_ns") || !j.contains("end_ns")) continue;
    lo = std::min(lo, j["start_ns"].get<Nanos>());
    hi = std::max(hi, j["end_ns"].get<Nanos>());
  }
  if (lo > hi) return std::nullopt;
  constexpr Nanos kSlack = 60 * kSecond;
  constexpr Nanos kLeast = std::numeric_limits<Nanos>::min(), kMost = std::numeric_limits<Nanos>::max();
  return std::make_pair(lo < kLeast + kSlack ? kLeast : lo - kSlack, hi > kMost - kSlack ? kMost : hi + kSlack);
}

// A damaged record (a time far outside the run) made compare and analyze report
// errors of 10^13 % and `results check` say ok, and would stretch a timeline over
// years: refused by every reader, naming the file and the record.
void check_record_times(const std::vector<Record>& recs, const std::pair<Nanos, Nanos>& span, const std::string& path, std::size_t rank) {
  for (std::size_t i = 0; i < recs.size(); ++i) {
    Record rec = recs[i];
    bool outside = false;
    rec.map_times([&](std::int64_t t) {
      outside = outside || t < span.first || t > span.second;
      return t;
    });
    if (outside) {
      throw std::runtime_error(path + ": record " + std::to_string(i) + " holds a time outside the run (rank-" + std::to_string(rank) +
                               ".json's start and end, a minute either side)");
    }
  }
}

KeptRecords load_records(const std::string& dir, const Profile& profile, bool keep_missing) {
  KeptRecords out;
  out.failure = run_failure(dir);
  const auto span = run_span(dir, profile.ranks.size());
  for (std::size_t r = 0; r < profile.ranks.size(); ++r) {
    const std::string path = run_dir::records_file(dir, static_cast<RankId>(r));
    if (!fs::exists(path)) {
      if (out.failure.empty()) throw std::runtime_error(dir + ": no records of rank " + std::to_string(r) + " (" + path + ")");
      if (!keep_missing) {
        throw std::runtime_error(dir + ": no records of rank " + std::to_string(r) + ": the run failed (" + out.failure +
                                 "); `tensorwire results rates` and `tensorwire view` show what the other ranks measured");
      }
      out.ranks.emplace_back();
      out.missing.push_back(static_cast<RankId>(r));
      continue;
    }
    out.ranks.push_back(read_records(path));
    const std::string bad = check_records(out.ranks.back(), static_cast<std::uint32_t>(r), profile);
    if (!bad.empty()) throw std::runtime_error(path + ": " + bad);
    if (span) check_record_times(out.ranks.back(), *span, path, r);
    // A rank ends no more iterations than its summary says it ran (fewer when it
    // failed): what is beyond was not written by its agent, and would size every
    // per-iteration table of what reads the run. A rank that finished, and whose
    // recorder dropped nothing, ended every one: fewer is a file cut short (a
    // header alone read as a rank that measured nothing).
    const std::string summary = run_dir::summary_file(dir, static_cast<RankId>(r));
    if (fs::exists(summary)) {
      const nlohmann::json s = run_dir::read_summary(dir, static_cast<RankId>(r));  // types checked there
      const auto ran = s["iterations"].get<std::uint64_t>();
      const auto ended = static_cast<std::uint64_t>(
          std::count_if(out.ranks.back().begin(), out.ranks.back().end(), [](const Record& x) { return x.is(RecordKind::iteration); }));
      if (ended > ran) {
        throw std::runtime_error(path + ": " + std::to_string(ended) + " iterations ended, but " + summary + " says the rank ran " +
                                 std::to_string(ran));
      }
      const bool whole = s.value("finished", false) && out.failure.empty() &&
                         (!s.contains("counters") || s["counters"].value("records_dropped", std::uint64_t{0}) == 0);
      if (whole && ended < ran) {
        throw std::runtime_error(path + ": " + std::to_string(ended) + " iterations ended, but " + summary + " says the rank finished " +
                                 std::to_string(ran));
      }
      // Cut at a record's boundary after the last iteration's record, a file lost
      // the transmit timestamps and TCP_INFO samples that followed it unsaid.
      const auto written = s.contains("counters") ? s["counters"].value("records_written", std::uint64_t{0}) : 0;
      if (whole && written > 0 && out.ranks.back().size() != written) {
        throw std::runtime_error(path + ": holds " + std::to_string(out.ranks.back().size()) + " records, but " + summary +
                                 " says the agent wrote " + std::to_string(written));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<Record>> load_run_records(const std::string& dir, const Profile& profile) {
  return load_records(dir, profile, false).ranks;
}

KeptRecords load_kept_run_records(const std::string& dir, const Profile& profile) { return load_records(dir, profile, true); }

namespace {

ReplaySettings read_settings(const std::string& dir, const nlohmann::json& run, std::size_t ranks, double time_scale) {
  ReplaySettings s;
  const auto back = [time_scale](Nanos x) { return static_cast<Nanos>(static_cast<double>(x) / time_scale); };
  std::string file = run_dir::run_file(dir);
  try {
    if (run.is_object() && run.contains("settings") && run["settings"].is_object()) {
      const nlohmann::json& x = run["settings"];
      s.open_loop = x.value("open_loop", false);
      s.open_loop_period = back(x.value("open_loop_period_ns", Nanos{0}));
      for (Nanos o : x.value("open_loop_offsets_ns", std::vector<Nanos>{})) s.open_loop_offsets.push_back(back(o));
      s.delay = back(x.value("delay_ns", Nanos{0}));
      // Scaled back already: at most what --delay-us allows (an hour), and an
      // open-loop plan's offsets within a thousand hours (a slow --link-gbps).
      const auto within = [&file](Nanos v, const char* what) {
        const auto most = static_cast<Nanos>(limits::kMaxDuration * run_dir::kMaxTimeScale);
        if (v < 0 || v > most) {
          throw std::runtime_error(file + ": settings: '" + what + "' must be from 0 to " + std::to_string(most) + " ns, not " +
                                   std::to_string(v));
        }
      };
      within(s.delay, "delay_ns");
      within(s.open_loop_period, "open_loop_period_ns");
      for (Nanos o : s.open_loop_offsets) within(o, "open_loop_offsets_ns");
    }
    for (std::size_t r = 0; r < ranks; ++r) {
      file = run_dir::summary_file(dir, static_cast<RankId>(r));
      if (!fs::exists(file)) continue;
      const nlohmann::json j = run_dir::read_summary(dir, static_cast<RankId>(r));
      if (!j.contains("options") || !j["options"].is_object()) continue;
      const nlohmann::json& o = j["options"];
      s.open_loop = s.open_loop || o.value("open_loop", false);
      if (r == 0 && !run.is_object()) s.delay = back(o.value("delay_ns", Nanos{0}));
      const double f = o.value("slowdown", 1.0);
      if (f != 1.0 && s.slowdown.empty()) s.slowdown.assign(ranks, 1.0);
      if (!s.slowdown.empty()) s.slowdown[r] = f;
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": " + e.what());
  }
  return s;
}

}  // namespace

LoadedRun load_run(const std::string& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + ": not a run directory");
  LoadedRun run;
  run.dir = dir;
  run.profile = load_run_profile(dir);
  const std::vector<std::vector<Record>> ranks = load_run_records(dir, run.profile);
  run.timeline = timeline_from_records(run.profile, ranks, "run " + dir);
  // A time-dilated run is compared at the original's speed.
  const nlohmann::json j = run_dir::read_run(dir);
  const double k = json_number(j, "time_scale", run_dir::run_file(dir), 1);  // checked by read_run
  if (k != 1) {
    scale_timeline(run.timeline, 1.0 / k);
    run.timeline.source += " (time-scaled x" + nlohmann::json(k).dump() + ", scaled back)";
  }
  run.settings = read_settings(dir, j, run.profile.ranks.size(), k);
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
  const ReplaySettings& rs = replay.settings;
  const MeasuredLinks links = measure_links(original, replay.timeline, rs.delay);
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
  o.latency = rs.delay;
  if (rs.slowdown.size() == original.ranks.size()) o.slowdown = rs.slowdown;
  // An open-loop replay is modelled open loop, on the plan its agents were given:
  // the offsets run.json lists, else the planned starts the agents recorded in
  // the first iteration (run.json keeps only the period).
  std::vector<Nanos> offsets = rs.open_loop_offsets;
  const std::size_t n = replay.timeline.iterations;
  if (offsets.empty() && replay.timeline.planned.size() == original.ops.size() * n) {
    for (std::size_t op = 0; op < original.ops.size(); ++op) offsets.push_back(std::max<Nanos>(0, replay.timeline.planned[op * n]));
  }
  const bool open_plan = rs.open_loop && rs.open_loop_period > 0 && offsets.size() == original.ops.size();
  if (open_plan) {
    o.executor.open_loop = true;
    o.executor.period = rs.open_loop_period;
    o.executor.offsets = std::move(offsets);
  }
  const std::string rates = links_summary(links.busy);
  const Timeline reference = timeline_from_simulation(
      model, simulate(model, o), std::string(open_plan ? "the open-loop " : "the ") + "timing model at the replay's measured link rates (" + rates + ")");
  r.comparison = compare_timelines(original, reference, replay.timeline);
  LowerBound lb = lower_bound(original, compute_stats(original), links.peak, links.message);
  if (rs.open_loop) {
    // Open loop, sends ignore their dependencies and compute is not run: only a
    // rank's bytes over its link bound an iteration.
    lb.iteration = std::max(lb.max_egress, lb.max_ingress);
    lb.limited_by = lb.max_egress >= lb.max_ingress ? "egress of rank " + std::to_string(lb.egress_rank)
                                                    : "ingress of rank " + std::to_string(lb.ingress_rank);
  }
  r.comparison.lower_bound_ns = lb.iteration;
  r.comparison.lower_bound_basis = lb.limited_by + "; a rank's bytes at its fastest iteration's rate, " + links_summary(links.peak) +
                                   (rs.open_loop ? "" : ", each message at its ranks' fastest message's, " + links_summary(links.message));
  r.note =
      "the timing model simulates the profile with each rank's link at the rate its messages achieved together while in flight "
      "(on loopback a rank has no link of its own: the rate is its flows' aggregate, and the model shares it among them)";
  if (rs.open_loop && !open_plan) r.note += "; the run was open loop, but its plan is not in its directory: the model runs closed loop";
  r.note += "; the lower bound takes the fastest rates the replay reached instead, so the run as a whole (its mean iteration) cannot beat the bound; a single job-wide iteration can, after a late one, as the ranks already started it";
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

// Reading what `compare` compares: run directories (of `tensorwire run` or
// `replay --local`) and profiles.
#pragma once

#include <string>
#include <vector>

#include "tensorwire/analysis/compare.hpp"
#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/records.hpp"

namespace tw {

// The profile a run directory replayed: its profile.yaml, else the path its
// rank-0.json names. Throws std::runtime_error when it has neither.
std::string run_profile_path(const std::string& dir);

// The profile of the run in `dir`, loaded. One named by a rank's summary (a
// replay by hand) may lie anywhere, and the summary may be forged: where it does
// not load as a profile the error names it but quotes none of its content (a
// summary naming /etc/shadow made every reader print its lines).
Profile load_run_profile(const std::string& dir);

// What failed the run in `dir`: run.json's error, or, for the runs that write no
// run.json (`replay --local`, agents started by hand), the lowest rank whose
// summary says it did not finish, with its error ("rank R did not finish: ..."),
// among the ranks from 0 to the first without a summary.
// Empty when nothing failed. Throws std::runtime_error naming a malformed file.
std::string run_failure(const std::string& dir);

// Every rank's records in a run directory, indexed by rank. Throws
// std::runtime_error naming the rank whose records are missing or unreadable.
std::vector<std::vector<Record>> load_run_records(const std::string& dir, const Profile& profile);

// A run that failed keeps what its surviving agents sent. Every rank's records,
// as load_run_records, except that in a run that failed (run_failure)
// a rank without a records file (its agent died before its upload) gets none
// and is named in `missing`.
struct KeptRecords {
  std::vector<std::vector<Record>> ranks;  // indexed by rank
  std::vector<RankId> missing;
  std::string failure;  // run_failure(); empty: the run did not fail
};
KeptRecords load_kept_run_records(const std::string& dir, const Profile& profile);

// What the agents were asked to do beyond the profile (run.json's settings, each
// rank-R.json's options), at the original's speed when the run was time-scaled.
struct ReplaySettings {
  bool open_loop = false;
  Nanos open_loop_period = 0;  // 0: not recorded
  std::vector<Nanos> open_loop_offsets;  // per op; empty: not recorded
  Nanos delay = 0;  // emulated one-way latency of every message
  std::vector<double> slowdown;  // per rank; empty: none
};

struct LoadedRun {
  std::string dir;
  Profile profile;  // the profile the run replayed
  Timeline timeline;
  ReplaySettings settings;
};

// A run directory: its profile (run_profile_path), every rank's records as a
// timeline and its settings. Throws std::runtime_error naming what is missing or
// which file is malformed.
LoadedRun load_run(const std::string& dir);

struct CompareResult {
  Profile profile;
  Comparison comparison;
  std::string note;  // how the reference was made, when it is the plan
};

// ORIGINAL is a run directory or a profile (with observed timings, or else the
// reference is the timing model: the profile simulated at the per-rank link rates
// the replay measured, with the lower bound at each rank's fastest rate beside it).
CompareResult compare_original(const std::string& original, const std::string& replay_dir);

// The same with the replay already loaded and the original a profile in memory.
CompareResult compare_with_profile(const Profile& original, const LoadedRun& replay);

}  // namespace tw

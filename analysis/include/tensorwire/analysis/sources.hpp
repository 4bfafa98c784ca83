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

// Every rank's records in a run directory, indexed by rank. Throws
// std::runtime_error naming the rank whose records are missing or unreadable.
std::vector<std::vector<Record>> load_run_records(const std::string& dir, const Profile& profile);

struct LoadedRun {
  std::string dir;
  Profile profile;  // the profile the run replayed
  Timeline timeline;
};

// A run directory: its profile (run_profile_path) and every rank's records as a
// timeline. Throws std::runtime_error naming what is missing.
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

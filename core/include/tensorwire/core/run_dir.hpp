// The one owner of a run directory's layout (docs/results-format.md): what the
// agents and the controller write there and every reader looks for.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tensorwire/core/profile.hpp"

namespace tw::run_dir {

std::string records_file(const std::string& dir, RankId rank);  // rank-R.twr
std::string summary_file(const std::string& dir, RankId rank);  // rank-R.json
std::string records_name(RankId rank);                          // the same, without the directory
std::string summary_name(RankId rank);
std::string profile_file(const std::string& dir);  // profile.yaml: the profile as replayed
std::string run_file(const std::string& dir);      // run.json: the controller's account of the run
std::string compare_file(const std::string& dir);  // compare.json
// Whether a file name is one of a run directory's own files, which the readers
// take: run.json, profile.yaml, roster.yaml, compare.json, rank-R.json and .twr,
// a profile's sidecar (*.observed.csv).
bool is_run_file(const std::string& file_name);
std::string logs_dir(const std::string& dir);      // logs/: each agent's output

// run.json, the controller's account of the run: null if there is none.
// Throws std::runtime_error naming the file if it is not a JSON object, or if
// its time_scale is not a number from kMinTimeScale to kMaxTimeScale.
nlohmann::json read_run(const std::string& dir);
inline constexpr double kMinTimeScale = 0.001;  // `tensorwire run --time-scale`'s bounds
inline constexpr double kMaxTimeScale = 1000;

// The summary an agent wrote (rank-R.json), its fields checked before anyone
// uses them: types, counts within the limits, `rank` R, and `iteration_times_ns`
// pairs of times; std::runtime_error "dir/rank-R.json: reason" otherwise (and
// "missing" when there is none).
nlohmann::json read_summary(const std::string& dir, RankId rank);

}  // namespace tw::run_dir

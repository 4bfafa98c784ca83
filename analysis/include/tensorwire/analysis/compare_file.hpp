// The comparison as JSON: what `tensorwire compare --json` prints and what
// `tensorwire run` leaves in a run directory as compare.json. Pure apart from
// reading the run and writing that file; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tensorwire/analysis/sources.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

// comparison_json, with the note on how the reference was made when there is one.
nlohmann::json compare_result_json(const CompareResult& r);

// Holds the run in `run_dir` against `original` (its observed timings, or else its
// plan) and writes the result to the run's compare.json. Throws
// std::runtime_error when the run cannot be read or the file cannot be written.
CompareResult write_run_comparison(const Profile& original, const std::string& run_dir);

}  // namespace tw

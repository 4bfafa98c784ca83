#include "tensorwire/analysis/compare_file.hpp"

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/run_dir.hpp"

namespace tw {

nlohmann::json compare_result_json(const CompareResult& r) {
  nlohmann::json j = comparison_json(r.profile, r.comparison);
  if (!r.note.empty()) j["note"] = r.note;
  return j;
}

CompareResult write_run_comparison(const Profile& original, const std::string& run_dir) {
  CompareResult r = compare_with_profile(original, load_run(run_dir));
  write_file_atomic(run_dir::compare_file(run_dir), json_text(compare_result_json(r), 2) + "\n");
  return r;
}

}  // namespace tw

// libFuzzer target for a run directory as a stranger hands it over: rank-0.json
// (an agent's summary) and rank-0.twr (its records), against a small profile.
// Reading them never crashes, hangs or takes memory beyond the input's size; the
// records that pass check_records go through every reader that sizes arrays by
// iteration or indexes by op (the run check, receive rates, the timeline).
#include <cstdint>
#include <exception>

#include "fuzz_files.hpp"
#include "tensorwire/analysis/rates.hpp"
#include "tensorwire/analysis/run_check.hpp"
#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/records.hpp"
#include "tensorwire/core/run_dir.hpp"

namespace {

const tw::Profile& profile() {
  static const tw::Profile p = [] {
    tw::ProfileLoad l = tw::load_profile_text(R"(
version: 1
iterations: 2
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}, {id: g, src: 1, dst: 0}]
ops:
  - {id: c, type: compute, rank: 0, duration: 1ms}
  - {id: s, type: send, flow: f, bytes: 1000, after: [c]}
  - {id: t, type: send, flow: g, bytes: 10, after: [recv:s]}
  - {id: d, type: compute, rank: 0, duration: 1ms, after: [recv:t]}
)", "fuzz.yaml");
    if (!l.ok()) std::abort();
    return std::move(*l.profile);
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [summary, records] = tw::fuzz::two_parts(data, size);
  const std::string& dir = tw::fuzz::scratch_dir();
  tw::fuzz::write_file(tw::run_dir::summary_file(dir, 0), summary);
  tw::fuzz::write_file(tw::run_dir::records_file(dir, 0), records);
  try {
    const nlohmann::json j = tw::run_dir::read_summary(dir, 0);
    (void)j;
  } catch (const std::runtime_error&) {
  }
  std::vector<tw::Record> recs;
  try {
    recs = tw::read_records(tw::run_dir::records_file(dir, 0));
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (!tw::check_records(recs, 0, profile()).empty()) return 0;
  const std::vector<std::vector<tw::Record>> ranks = {recs, {}};
  tw::RunCheckOptions o;
  (void)tw::check_run(profile(), ranks, o);
  (void)tw::receive_rates(profile(), ranks);
  (void)tw::timeline_from_records(profile(), ranks, "fuzz");
  return 0;
}

// libFuzzer target for a built profile with its observed timings in a sidecar:
// the input is a profile (first part) and the CSV it names in
// `observed.ops_file` (second part, written as ops.csv next to it). Loading
// never crashes, hangs or reads outside its input, whatever either holds; a
// profile that loads writes back to text that loads (the sidecar's rows
// inline).
#include <cstdint>

#include "fuzz_files.hpp"
#include "profile_round_trip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [profile, csv] = tw::fuzz::two_parts(data, size);
  const std::string& dir = tw::fuzz::scratch_dir();
  tw::fuzz::write_file(dir + "/ops.csv", csv);
  tw::fuzz::check_loads_again(tw::load_profile_text(profile, dir + "/built.yaml", dir));
  return 0;
}

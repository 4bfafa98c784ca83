// For the fuzz targets of the profile loader: a profile that loads must write
// back to text that loads; anything else aborts (a finding).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "tensorwire/core/profile_io.hpp"

namespace tw::fuzz {

inline void check_loads_again(const ProfileLoad& load) {
  if (!load.ok()) return;
  const ProfileLoad again = load_profile_text(write_profile_yaml(*load.profile), "again.yaml");
  if (!again.ok()) {
    std::fprintf(stderr, "a loaded profile does not load again: %s\n", again.diagnostics[0].str().c_str());
    std::abort();
  }
}

}  // namespace tw::fuzz

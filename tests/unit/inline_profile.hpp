// Profiles for unit tests: written inline, or the bundled ones.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tensorwire/core/profile_io.hpp"

namespace tw::test {

// The profile in `text` (YAML); a failed load fails the test with the first
// diagnostic and returns an empty profile.
inline Profile inline_profile(const std::string& text) {
  ProfileLoad l = load_profile_text(text, "t.yaml");
  EXPECT_TRUE(l.ok()) << (l.diagnostics.empty() ? "" : l.diagnostics[0].str());
  return l.ok() ? std::move(*l.profile) : Profile{};
}

// A profile of traffic_profiles/ by file name, loaded the same way.
inline Profile bundled_profile(const std::string& name) {
  ProfileLoad l = load_profile_file(std::string(TW_SOURCE_DIR) + "/traffic_profiles/" + name);
  EXPECT_TRUE(l.ok()) << name << ": " << (l.diagnostics.empty() ? "" : l.diagnostics[0].str());
  return l.ok() ? std::move(*l.profile) : Profile{};
}

}  // namespace tw::test

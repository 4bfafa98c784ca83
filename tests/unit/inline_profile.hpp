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

// Two ranks, one message: rank 0 computes for `compute` ("c"), sends `bytes`
// ("s") to rank 1, which computes for 2 ms once it has it ("d").
inline Profile one_message(const std::string& compute, const std::string& bytes, int iterations = 1) {
  return inline_profile("version: 1\niterations: " + std::to_string(iterations) + R"(
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}]
ops:
  - {id: c, type: compute, rank: 0, duration: )" + compute + R"(}
  - {id: s, type: send, flow: f, bytes: )" + bytes + R"(, after: [c]}
  - {id: d, type: compute, rank: 1, duration: 2ms, after: [recv:s]}
)");
}

// A profile of traffic_profiles/ by file name, loaded the same way.
inline Profile bundled_profile(const std::string& name) {
  ProfileLoad l = load_profile_file(std::string(TW_SOURCE_DIR) + "/traffic_profiles/" + name);
  EXPECT_TRUE(l.ok()) << name << ": " << (l.diagnostics.empty() ? "" : l.diagnostics[0].str());
  return l.ok() ? std::move(*l.profile) : Profile{};
}

}  // namespace tw::test

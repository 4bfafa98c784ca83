// libFuzzer target for everything that reads untrusted profile text:
// 1. wherever the fast YAML path accepts an input, yaml-cpp must accept it too
//    and build the same tree (positions, values, quoting);
// 2. loading and validating a profile never crashes, hangs or leaks, however
//    malformed the input; a successful load must write back to text that loads.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "../support/yaml_compare.hpp"
#include "profile_round_trip.hpp"
#include "tensorwire/core/yaml_doc.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto fast = tw::YamlDoc::parse_fast(text, "fuzz.yaml")) {
    tw::Diagnostic error;
    const auto reference = tw::YamlDoc::parse_reference(text, "fuzz.yaml", &error);
    if (!reference) {
      std::fprintf(stderr, "fast path accepted what yaml-cpp rejects: %s\n", error.str().c_str());
      std::abort();
    }
    std::string why;
    if (!tw::test::same_tree(*fast, *reference, &why)) {
      std::fprintf(stderr, "fast path and yaml-cpp disagree: %s\n", why.c_str());
      std::abort();
    }
  }
  tw::fuzz::check_loads_again(tw::load_profile_text(text, "fuzz.yaml", "/nonexistent-fuzz-dir"));
  return 0;
}

// How fast a large profile loads: tensorwire's loader (fast YAML path + full
// validation) against, in the same run, yaml-cpp's YAML::LoadFile of the same file
// (the parse alone, no validation), and tensorwire's loader on yaml-cpp's parser.
// Prints a Markdown fragment for docs/BENCHMARKS.md.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/yaml_doc.hpp"
#include "tensorwire/profile/synth.hpp"

namespace {

double median_seconds(int runs, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint32_t ranks = argc > 1 ? static_cast<std::uint32_t>(std::stoul(argv[1])) : 40;
  const int runs = argc > 2 ? std::stoi(argv[2]) : 5;
  tw::SynthOptions o;
  o.ranks = ranks;
  o.iterations = 100;
  const tw::Profile p = tw::synthesize(tw::load_model("bert-large"), o);
  const std::string text = tw::write_profile_yaml(p);
  const auto path = std::filesystem::temp_directory_path() / "tw-bench-profile.yaml";
  tw::write_file_atomic(path.string(), text);
  const double mb = static_cast<double>(text.size()) / 1e6;

  std::size_t ops = 0;
  const double ours = median_seconds(runs, [&] {
    const tw::ProfileLoad l = tw::load_profile_file(path.string());
    if (!l.ok()) {
      std::fprintf(stderr, "%s\n", l.diagnostics[0].str().c_str());
      std::exit(1);
    }
    ops = l.profile->ops.size();
  });
  const double reference_parse = median_seconds(std::max(1, runs / 2), [&] {
    tw::Diagnostic e;
    if (!tw::YamlDoc::parse_reference(text, "x", &e)) std::exit(1);
  });
  const double yamlcpp = median_seconds(std::max(1, runs / 2), [&] {
    const YAML::Node n = YAML::LoadFile(path.string());
    if (n["ops"].size() != ops) std::exit(1);
  });
  std::filesystem::remove(path);

  std::printf("## Profile loading\n\n");
  std::printf("A synthetic BERT-large ring all-reduce profile over %u ranks: %zu ops, %.1f MB of YAML. "
              "Median of %d runs (`bench/profile_load_bench %u %d`).\n\n",
              ranks, ops, mb, runs, ranks, runs);
  std::printf("| what | time | throughput |\n|---|---|---|\n");
  std::printf("| tensorwire `load_profile_file` (fast YAML path, full validation) | %.3f s | %.1f MB/s |\n", ours, mb / ours);
  std::printf("| baseline: yaml-cpp `YAML::LoadFile`, parse only, no validation | %.3f s | %.1f MB/s |\n", yamlcpp, mb / yamlcpp);
  std::printf("| yaml-cpp event parser into our tree (the fallback path), parse only | %.3f s | %.1f MB/s |\n",
              reference_parse, mb / reference_parse);
  std::printf("\nLoading with validation is %.1fx faster than yaml-cpp's parse alone; %.0f k ops/s.\n", yamlcpp / ours,
              static_cast<double>(ops) / ours / 1e3);
  return 0;
}

// The options of `profile synth`, shared with `simulate --ranks`, which makes the
// same job again at another size from a profile's metadata.generator.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tensorwire/profile/synth.hpp"

namespace tw::cli {

struct SynthArgs {
  std::string model;
  std::string pattern = "ring-allreduce";
  std::uint32_t ranks = 4;
  std::uint32_t servers = 1;
  std::uint64_t iterations = 10;
  double bucket_mib = 25;
  double first_bucket_mib = 1;
  double segment_kib = 1024;
  double partition_mib = 4;
  double agg_gbytes = 10;
  double fwd_ms = 0;
  double bwd_ms = 0;
  double optimizer_ms = 0;
  bool overlap_forward = false;
  std::string out;
};

// Every option of `profile synth` but -o.
void add_synth_options(CLI::App* app, SynthArgs& a);

// Throws std::invalid_argument naming the bad option.
SynthOptions synth_options(const SynthArgs& a);

// The synth options that made a profile, from its metadata.generator ("tensorwire
// profile synth ..."); throws std::invalid_argument when it was not synthesised.
SynthArgs synth_args_of(const std::string& generator);

}  // namespace tw::cli

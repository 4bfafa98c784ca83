#include "synth_options.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tw::cli {
namespace {

Bytes mib(double v, const char* option) {
  if (!(v > 0) || v > 1024 * 1024) throw std::invalid_argument(std::string(option) + " must be positive");
  return static_cast<Bytes>(std::llround(v * static_cast<double>(kMiB)));
}

Nanos ms(double v) { return static_cast<Nanos>(std::llround(v * 1e6)); }

}  // namespace

void add_synth_options(CLI::App* s, SynthArgs& a) {
  s->add_option("-m,--model", a.model, "Bundled model (see `profile models`) or a tensor-list YAML file")->required();
  s->add_option("-p,--pattern", a.pattern, "ring-allreduce (PyTorch DDP over Gloo) or ps (parameter server)")->capture_default_str();
  s->add_option("-n,--ranks,--workers", a.ranks, "Ranks of the ring, or workers of the parameter server")->capture_default_str();
  s->add_option("--servers", a.servers, "Parameter servers (ps)")->capture_default_str();
  s->add_option("-i,--iterations", a.iterations, "Iterations to replay")->capture_default_str();
  s->add_option("--bucket-mib", a.bucket_mib, "DDP bucket size (bucket_cap_mb)")->capture_default_str();
  s->add_option("--first-bucket-mib", a.first_bucket_mib, "DDP's first, smaller bucket")->capture_default_str();
  s->add_option("--segment-kib", a.segment_kib, "Largest ring segment (Gloo)")->capture_default_str();
  s->add_option("--partition-mib", a.partition_mib, "ps: tensors larger than this are split into keys")->capture_default_str();
  s->add_option("--agg-gbytes", a.agg_gbytes, "ps: server aggregation rate, GB/s")->capture_default_str();
  s->add_option("--fwd-ms", a.fwd_ms, "Forward compute per iteration (default: the model's)");
  s->add_option("--bwd-ms", a.bwd_ms, "Backward compute per iteration (default: the model's)");
  s->add_option("--optimizer-ms", a.optimizer_ms, "Optimizer step per iteration on each worker (default: none)");
  s->add_flag("--overlap-forward", a.overlap_forward,
              "ps: no iteration barrier; each layer's forward waits only for its own parameters' pulls (BytePS, P3)");
}

SynthOptions synth_options(const SynthArgs& a) {
  SynthOptions o;
  o.pattern = parse_pattern(a.pattern);
  o.ranks = a.ranks;
  o.servers = a.servers;
  o.iterations = a.iterations;
  o.bucket_bytes = mib(a.bucket_mib, "--bucket-mib");
  o.first_bucket_bytes = mib(a.first_bucket_mib, "--first-bucket-mib");
  o.max_segment_bytes = mib(a.segment_kib / 1024.0, "--segment-kib");
  o.partition_bytes = mib(a.partition_mib, "--partition-mib");
  if (!(a.agg_gbytes > 0)) throw std::invalid_argument("--agg-gbytes must be positive");
  o.aggregate_bytes_per_s = a.agg_gbytes * 1e9;
  if (a.fwd_ms != 0) o.fwd = ms(a.fwd_ms);
  if (a.bwd_ms != 0) o.bwd = ms(a.bwd_ms);
  o.optimizer = ms(a.optimizer_ms);
  o.overlap_forward = a.overlap_forward;
  if (o.overlap_forward && o.pattern != Pattern::parameter_server) throw std::invalid_argument("--overlap-forward applies to --pattern ps only");
  if (o.overlap_forward && o.optimizer > 0) throw std::invalid_argument("--overlap-forward: the optimizer step is per layer, on the server; leave out --optimizer-ms");
  return o;
}

SynthArgs synth_args_of(const std::string& generator) {
  std::istringstream in(generator);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() < 3 || words[1] != "profile" || words[2] != "synth") {
    throw std::invalid_argument("it was not made by `tensorwire profile synth` (metadata.generator: \"" + generator + "\")");
  }
  SynthArgs a;
  CLI::App app;
  add_synth_options(&app, a);
  std::vector<std::string> args(words.rbegin(), words.rend() - 3);  // CLI11 parses a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument("its metadata.generator does not parse: " + std::string(e.what()));
  }
  return a;
}

}  // namespace tw::cli

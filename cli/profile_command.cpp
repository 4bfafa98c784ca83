// `tensorwire profile ...`: synth, validate, show, models.
#include <algorithm>
#include <fmt/core.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "synth_options.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_stats.hpp"
#include "tensorwire/core/text_table.hpp"
#include "tensorwire/profile/synth.hpp"

namespace tw::cli {
namespace {

std::string number(double v) { return fmt::format("{:g}", v); }

int run_synth(const SynthArgs& a) {
  const Model model = load_model(a.model);
  const SynthOptions o = synth_options(a);

  Profile p = synthesize(model, o);
  // The canonical command, so that the file says how to make it again.
  std::string gen = "tensorwire profile synth --model " + a.model + " --pattern " + pattern_name(o.pattern) +
                    " --ranks " + std::to_string(a.ranks) + " --iterations " + std::to_string(a.iterations);
  if (o.pattern == Pattern::parameter_server) {
    gen += " --servers " + std::to_string(a.servers) + " --partition-mib " + number(a.partition_mib) + " --agg-gbytes " +
           number(a.agg_gbytes);
  } else {
    gen += " --bucket-mib " + number(a.bucket_mib) + " --first-bucket-mib " + number(a.first_bucket_mib) +
           " --segment-kib " + number(a.segment_kib);
  }
  if (o.fwd) gen += " --fwd-ms " + number(a.fwd_ms);
  if (o.bwd) gen += " --bwd-ms " + number(a.bwd_ms);
  if (o.optimizer > 0) gen += " --optimizer-ms " + number(a.optimizer_ms);
  p.metadata.generator = gen;

  const std::string text = write_profile_yaml(p);
  if (a.out.empty() || a.out == "-") {
    std::cout << text;
  } else {
    write_file_atomic(a.out, text);
  }
  const ProfileStats s = compute_stats(p);
  fmt::print(stderr, "{}: {} ranks, {} flows, {} ops per iteration ({} compute, {} send), {} per iteration, {} iterations\n",
             a.out.empty() || a.out == "-" ? "stdout" : a.out, p.ranks.size(), p.flows.size(), p.ops.size(),
             s.compute_ops, s.send_ops, human_bytes(s.bytes_per_iteration), p.iterations);
  return 0;
}

int run_validate(const std::vector<std::string>& files, bool quiet) {
  int status = 0;
  for (const auto& f : files) {
    const ProfileLoad load = load_profile_file(f);
    for (const auto& d : load.diagnostics) fmt::print(stderr, "{}\n", d.str());
    if (!load.ok()) {
      status = 1;
      continue;
    }
    if (!quiet) {
      const Profile& p = *load.profile;
      fmt::print("{}: ok ({} ranks, {} flows, {} ops per iteration, {} iterations)\n", f, p.ranks.size(), p.flows.size(),
                 p.ops.size(), p.iterations);
    }
  }
  return status;
}

int run_show(const std::string& file, bool json, double link_gbps) {
  if (!(link_gbps > 0)) throw std::invalid_argument("--link-gbps must be positive");
  const Profile p = load_profile_or_throw(file);
  const ProfileStats s = compute_stats(p);
  const LowerBound b = lower_bound(p, s, link_gbps * 1e9);
  if (json) {
    nlohmann::json j = stats_json(p, s, b);
    j["file"] = file;
    std::cout << json_text(j, 2) << "\n";
    return 0;
  }
  const Metadata& m = p.metadata;
  std::string what = m.source.empty() ? "profile" : m.source + " profile";
  if (!m.model.empty()) what += " of " + m.model;
  if (!m.pattern.empty()) what += ", " + m.pattern;
  if (!m.framework.empty()) what += " (" + m.framework + ")";
  fmt::print("{}: {}\n", file, what);
  fmt::print("  ranks {}, flows {}, iterations {}, iteration barrier {}\n", p.ranks.size(), p.flows.size(), p.iterations,
             p.iteration_barrier ? "on" : "off");
  fmt::print("  ops per iteration {}: {} compute, {} send; tensors {}\n", p.ops.size(), s.compute_ops, s.send_ops, s.tensors);
  if (s.send_ops > 0) {
    fmt::print("  bytes per iteration {}; messages from {} to {}\n", human_bytes(s.bytes_per_iteration),
               human_bytes(s.smallest_message), human_bytes(s.largest_message));
  }
  const auto varying_durations = std::count_if(p.ops.begin(), p.ops.end(), [](const Op& op) { return !op.durations.empty(); });
  const auto varying_gaps = std::count_if(p.ops.begin(), p.ops.end(), [](const Op& op) { return !op.gaps.empty(); });
  if (varying_durations + varying_gaps > 0) {
    fmt::print("  each iteration its own: durations of {} of the compute ops, gaps of {} ops (compute and the\n"
               "  lower bound below use their means)\n", varying_durations, varying_gaps);
  }
  fmt::print("\n");
  TextTable ranks({"rank", "role", "host", "sends/iter", "receives/iter", "compute/iter", "compute ops", "send ops"});
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const auto& x = s.ranks[r];
    ranks.add({std::to_string(r), role_name(p.ranks[r].role), p.ranks[r].host.empty() ? "-" : p.ranks[r].host,
               human_bytes(x.sent), human_bytes(x.received), human_duration(x.compute), std::to_string(x.compute_ops),
               std::to_string(x.send_ops)});
  }
  fmt::print("{}\n", ranks.str(2));
  const bool lags = std::any_of(p.flows.begin(), p.flows.end(), [](const Flow& f) { return f.read_lag != 0; });
  std::vector<std::string> head = {"flow", "src", "dst", "bytes/iter", "messages"};
  if (lags) head.push_back("read lag");
  TextTable flows(head);
  for (std::size_t f = 0; f < p.flows.size(); ++f) {
    std::vector<std::string> row = {p.flows[f].id, std::to_string(p.flows[f].src), std::to_string(p.flows[f].dst),
                                    human_bytes(s.flows[f].bytes), std::to_string(s.flows[f].messages)};
    if (lags) row.push_back(p.flows[f].read_lag != 0 ? human_duration(p.flows[f].read_lag) : "-");
    flows.add(row);
  }
  fmt::print("{}\n", flows.str(2));
  fmt::print("lower bound at {} per link: {} per iteration (limited by {}), {} for {} iterations\n", human_rate(b.link_bps),
             human_duration(b.iteration), b.limited_by, human_duration(b.run), p.iterations);
  fmt::print("  critical path {} ({} ops), max compute {} (rank {}), max egress {} (rank {}), max ingress {} (rank {})\n",
             human_duration(b.critical_path), b.critical_ops.size(), human_duration(b.max_compute), b.compute_rank,
             human_duration(b.max_egress), b.egress_rank, human_duration(b.max_ingress), b.ingress_rank);
  return 0;
}

int run_models() {
  TextTable t({"model", "tensors", "parameters", "bytes", "fwd", "bwd"});
  for (const auto& name : bundled_models()) {
    const Model m = load_model(name);
    t.add({name, std::to_string(m.tensors.size()), fmt::format("{:.1f} M", static_cast<double>(m.total_elements()) / 1e6),
           human_bytes(m.total_bytes()), human_duration(m.fwd), human_duration(m.bwd)});
  }
  fmt::print("{}", t.str());
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, Action& action) {
  CLI::App* profile = app.add_subcommand("profile", "Make, check and inspect traffic profiles (YAML)");
  profile->require_subcommand(0, 1);

  auto synth = std::make_shared<SynthArgs>();
  CLI::App* s = profile->add_subcommand("synth", "Synthesise a profile from a model's tensor list and a communication pattern");
  add_synth_options(s, *synth);
  s->add_option("-o,--out", synth->out, "Output file (default: standard output)");
  s->callback([&action, synth] { action = [synth] { return run_synth(*synth); }; });

  auto files = std::make_shared<std::vector<std::string>>();
  auto quiet = std::make_shared<bool>(false);
  CLI::App* v = profile->add_subcommand("validate", "Check profiles; print every problem as FILE:LINE:COL: reason");
  v->add_option("files", *files, "Profile files")->required();
  v->add_flag("-q,--quiet", *quiet, "Print only problems");
  v->callback([&action, files, quiet] { action = [files, quiet] { return run_validate(*files, *quiet); }; });

  struct ShowArgs {
    std::string file;
    bool json = false;
    double link_gbps = 10;
  };
  auto show = std::make_shared<ShowArgs>();
  CLI::App* sh = profile->add_subcommand("show", "Summarise a profile: ranks, flows, bytes, compute, lower bound");
  sh->add_option("file", show->file, "Profile file")->required();
  sh->add_flag("--json", show->json, "Machine-readable output");
  sh->add_option("--link-gbps", show->link_gbps, "Link rate for the iteration-time lower bound")
      ->capture_default_str()
      ->check(finite_range(1e-6, 1e6));
  sh->callback([&action, show] { action = [show] { return run_show(show->file, show->json, show->link_gbps); }; });

  add_profile_build_command(*profile, action);

  CLI::App* models = profile->add_subcommand("models", "List the bundled model tensor lists");
  models->callback([&action] { action = [] { return run_models(); }; });
}

}  // namespace tw::cli

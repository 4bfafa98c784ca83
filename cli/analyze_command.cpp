// `tensorwire analyze SOURCE` (the diagnosis) and `tensorwire simulate PROFILE`
// (the what-if simulator). docs/analysis.md describes both.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "replay_options.hpp"
#include "synth_options.hpp"
#include "tensorwire/analysis/diagnosis.hpp"
#include "tensorwire/analysis/graph_sim.hpp"
#include "tensorwire/analysis/mitigation.hpp"
#include "tensorwire/analysis/priority.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/launch/testbed.hpp"
#include "tensorwire/profile/model.hpp"
#include "tensorwire/profile/twin.hpp"
#include "tensorwire/core/output_check.hpp"
#include "tensorwire/util/parallel.hpp"
#include "tensorwire/view/diagnosis_input.hpp"

namespace tw::cli {
namespace {

double rate_option(const std::string& name, const std::string& text) {
  const auto r = parse_rate(text);
  if (!r) throw std::invalid_argument(name + " '" + text + "': expected a rate like 10gbit or 300mbit");
  return static_cast<double>(*r);
}

Nanos duration_option(const std::string& name, const std::string& text) {
  const auto d = parse_duration(text);
  if (!d || *d < 0) throw std::invalid_argument(name + " '" + text + "': expected a duration like 20us or 1.5ms");
  return *d;
}

struct AnalyzeArgs {
  std::vector<std::string> sources;
  DiagnosisOptions options;
  std::string link_rate = "10gbit";
  std::string json_out;
  std::string emit_mitigated;
  bool json = false;
};

// The job the fusion hint remakes with other bucket sizes: a synthesised DDP
// ring from its generator's arguments, or the DDP twin of a built ring profile
// (tensorwire/profile/twin.hpp). Nothing for other jobs, with why in `why`.
struct BucketJob {
  Model model;
  SynthOptions options;
  std::optional<DdpTwin> twin;
};

std::optional<BucketJob> bucket_job(const Profile& p, std::string& why) {
  SynthArgs sa;
  bool synthesised = true;
  try {
    sa = synth_args_of(p.metadata.generator);
  } catch (const std::invalid_argument&) {
    synthesised = false;
  }
  if (synthesised) {
    if (parse_pattern(sa.pattern) != Pattern::ring_allreduce) {
      why = "not a ring all-reduce";
      return std::nullopt;
    }
    try {
      sa.iterations = 4;
      return BucketJob{load_model(sa.model), synth_options(sa), std::nullopt};
    } catch (const std::exception&) {
      why = "the tensor list the profile was made from is not at hand";
      return std::nullopt;
    }
  }
  auto twin = ddp_twin(p, why);
  if (!twin) return std::nullopt;
  BucketJob j{twin->model, twin->options, std::nullopt};
  j.twin = std::move(twin);
  return j;
}

// The bucket caps the fusion hint tries, MiB.
constexpr std::array<double, 8> kCaps{1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0};

// The fusion hint: the job made again with buckets of 1 to 200 MiB and
// simulated on the link model the diagnosis fitted (the median of its flows).
// A twin is first simulated at its own buckets and set against the measured
// iteration; the hint says how close it came. JSON null when there is no hint.
nlohmann::json bucket_hint(const Profile& p, const Diagnosis& d, unsigned threads, std::string& text, std::string& why) {
  auto job = bucket_job(p, why);
  if (!job) return nullptr;
  std::vector<double> bps, path;
  std::vector<Nanos> pm, lat;
  // A twin's link is its ring flows' (a capture's notification flows fit
  // rates of a few Mb/s); a synthesised ring's flows all carry data.
  std::vector<FlowIndex> flows;
  if (job->twin) {
    flows = job->twin->ring_flows;
  } else {
    for (FlowIndex f = 0; f < d.flows.size(); ++f) flows.push_back(f);
  }
  for (const FlowIndex fi : flows) {
    const FlowFit& f = d.flows.at(fi);
    if (!f.fitted) continue;
    bps.push_back(f.bps), pm.push_back(f.per_message), lat.push_back(f.latency), path.push_back(f.path_bps);
  }
  if (bps.empty()) {
    why = "no flow had enough timed messages for a link fit";
    return nullptr;
  }
  const auto med = [](auto v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  FlowModel link;
  link.bps = med(bps), link.per_message = med(pm), link.latency = med(lat), link.path_bps = med(path);
  const auto graph_at = [&](Bytes bucket) {
    SynthOptions o = job->options;
    o.bucket_bytes = bucket;
    return synthesize_graph(job->model, o, link);
  };
  const auto mean_of = [](const SimGraph& g) { return static_cast<Nanos>(std::llround(simulate_graph(g).mean_iteration(1))); };
  const auto simulated = [&](Bytes bucket) { return mean_of(graph_at(bucket)); };
  const double mib = static_cast<double>(kMiB);
  const Bytes current = job->options.bucket_bytes;
  // A twin's forward (and its backward, twice that) is fitted by bisection so
  // that at its own buckets it takes the measured iteration time; the first
  // guess and its time are kept for the JSON.
  Nanos guess_fwd = 0, guess_time = 0;
  if (job->twin) {
    DdpTwin& t = *job->twin;
    const auto at_forward = [&](Nanos fwd) {
      set_forward(t, fwd);
      job->model = t.model;
      return simulated(current);
    };
    guess_fwd = t.fwd;
    guess_time = at_forward(guess_fwd);
    Nanos lo = kMicro, hi = std::max(guess_fwd, d.measured);  // the synthesiser wants some forward
    if (d.measured > 0 && at_forward(lo) < d.measured) {
      for (int step = 0; step < 40 && hi - lo > std::max<Nanos>(1000, d.measured / 1000); ++step) {
        const Nanos mid = lo + (hi - lo) / 2;
        (at_forward(mid) < d.measured ? lo : hi) = mid;
      }
      at_forward(lo + (hi - lo) / 2);
    }
  }
  Nanos now = 0;
  {
    const SimGraph g = graph_at(current);
    now = mean_of(g);
    // As many caps at once as fit, as the diagnosis's what-ifs.
    threads = what_if_threads(threads, kCaps.size(), what_if_bytes(g));
  }
  nlohmann::json tried = nlohmann::json::array();
  Bytes best = current;
  Nanos best_time = now;
  // The caps tried, each made and simulated on its own, in parallel.
  std::array<Nanos, kCaps.size()> at_cap{};
  parallel_for(kCaps.size(), threads, [&](std::size_t k) {
    const auto bytes = static_cast<Bytes>(kCaps[k] * mib);
    at_cap[k] = bytes == current ? now : simulated(bytes);
  });
  for (std::size_t k = 0; k < kCaps.size(); ++k) {
    const auto bytes = static_cast<Bytes>(kCaps[k] * mib);
    const Nanos t = at_cap[k];
    tried.push_back({{"bucket_mib", kCaps[k]}, {"iteration_ns", t}});
    if (t < best_time) best = bytes, best_time = t;
  }
  const double current_mib = static_cast<double>(current) / mib, best_mib = static_cast<double>(best) / mib;
  nlohmann::json j = {{"current_mib", current_mib}, {"best_mib", best_mib}, {"current_ns", now}, {"best_ns", best_time},
                      {"predicted_saving_ns", now - best_time}, {"tried", tried}, {"source", job->twin ? "twin" : "generator"}};
  const std::string simulated_at = fmt::format("simulated at {}", human_rate(link.bps));
  if (!job->twin) {
    text = best == current ? fmt::format("\nfusion hint: the profile's {:g} MiB DDP buckets are the best of 1 to 200 MiB ({} per iteration, {})\n",
                                         current_mib, human_duration(now), simulated_at)
                           : fmt::format("\nfusion hint: DDP buckets of {:g} MiB instead of {:g} MiB: {} per iteration against {}, {} less ({})\n",
                                         best_mib, current_mib, human_duration(best_time), human_duration(now),
                                         human_duration(now - best_time), simulated_at);
    return j;
  }
  // A twin's largest later bucket is what the job's cap (bucket_cap_mb) gave,
  // not the cap itself: a cap above it makes the same buckets.
  const DdpTwin& t = *job->twin;
  std::string sizes;
  for (const Bytes b : t.buckets) sizes += (sizes.empty() ? "" : ", ") + human_bytes(b);
  const double error = d.measured > 0 ? static_cast<double>(now - d.measured) / static_cast<double>(d.measured) : 0;
  j["twin"] = {{"buckets", t.buckets}, {"gradient_bytes", t.gradient_bytes}, {"fwd_ns", t.fwd}, {"bwd_ns", t.bwd}, {"iteration_ns", now},
               {"error", error}, {"guess_fwd_ns", guess_fwd}, {"guess_iteration_ns", guess_time}};
  text = fmt::format(
      "\nfusion hint, from a DDP twin of the job ({} gradient bucket(s) inferred from its traffic: {}; forward {} and backward {}, "
      "fitted so that the twin takes the measured {} per iteration{}):",
      t.buckets.size(), sizes, human_duration(t.fwd), human_duration(t.bwd), human_duration(d.measured),
      std::abs(error) > 0.05 ? fmt::format(", but it takes {} ({:+.0f}%)", human_duration(now), error * 100) : std::string());
  text += best == current ? fmt::format(" its buckets are the best of bucket caps from 1 to 200 MiB ({})\n", simulated_at)
                          : fmt::format(" a bucket cap of {:g} MiB (bucket_cap_mb) gives {} per iteration against {}, {} less ({})\n",
                                        best_mib, human_duration(best_time), human_duration(now), human_duration(now - best_time),
                                        simulated_at);
  return j;
}

// A profile whose metadata.generator was edited by hand gets no hint, not a
// failed analysis. `why`: why there is none.
nlohmann::json bucket_hint_or_none(const Profile& p, const Diagnosis& d, unsigned threads, std::string& text, std::string& why) {
  try {
    return bucket_hint(p, d, threads, text, why);
  } catch (const std::exception& e) {
    text.clear();
    why = e.what();
    return nullptr;
  }
}

// On a terminal, a line on stderr saying which what-ifs run and how many are
// done, rewritten in place and cleared before anything else is printed: a
// diagnosis runs well over a hundred whole-job simulations, tens of seconds for
// a large job. Nothing when stderr is not a terminal.
class ProgressLine {
 public:
  ProgressLine() : on_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void operator()(const char* stage, std::size_t done, std::size_t total) {
    if (!on_) return;
    if (total == 0) fmt::print(stderr, "\ranalyze: {}\033[K", stage);
    else fmt::print(stderr, "\ranalyze: what-ifs of {}: {} of {}\033[K", stage, done, total);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (!shown_) return;
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
};

int analyze_command(const AnalyzeArgs& a) {
  for (const std::string* out : {&a.json_out, &a.emit_mitigated}) {
    if (!out->empty()) check_output_path(*out, a.sources);
  }
  const DiagnosisInput in = view::diagnosis_input(a.sources, rate_option("--link-rate", a.link_rate));
  ProgressLine progress;
  DiagnosisOptions options = a.options;
  options.progress = [&](const char* stage, std::size_t done, std::size_t total) { progress(stage, done, total); };
  const Diagnosis d = [&] {
    try {
      return diagnose(in, options);
    } catch (const std::exception& e) {  // nothing to analyse in it, or a simulation that stalls: say which source
      progress.clear();
      throw std::runtime_error(in.source + ": " + e.what());
    }
  }();
  nlohmann::json j = diagnosis_json(d, in.profile);
  progress.clear();
  std::string mitigation;
  if (!a.emit_mitigated.empty()) {
    std::string why;
    const auto m = mitigate(in, d, a.options, why);
    if (!m) throw std::runtime_error("--emit-mitigated: nothing to mitigate: " + why);
    write_file_atomic(a.emit_mitigated, write_profile_yaml(m->profile));
    j["mitigation"] = {{"kind", m->kind}, {"description", m->description}, {"file", a.emit_mitigated}, {"predicted_ns", m->predicted},
                       {"before_ns", m->before}, {"after_ns", m->after}};
    mitigation = fmt::format("\nmitigation, in {}: {}; predicted saving {} per iteration (simulated {} -> {})\n", a.emit_mitigated,
                             m->description, human_duration(m->predicted), human_duration(m->before), human_duration(m->after));
  }
  std::string hint;
  std::string no_hint;
  progress("the fusion hint's bucket caps", 0, 0);
  j["hints"] = {{"bucket", bucket_hint_or_none(in.profile, d, a.options.threads, hint, no_hint)}};
  progress.clear();
  if (j["hints"]["bucket"].is_null()) j["hints"]["bucket_none"] = no_hint;
  if (!a.json_out.empty()) write_file_atomic(a.json_out, json_text(j, 1) + "\n");
  if (a.json) {
    fmt::print("{}\n", json_text(j, 2));
  } else {
    fmt::print("{}{}{}", diagnosis_text(d, in.profile), hint, mitigation);
  }
  return 0;
}

struct SimulateArgs {
  std::string profile;
  std::string link_rate = "10gbit";
  std::string latency = "0";
  std::string per_message = "0";
  bool shared = false;
  std::uint64_t iterations = 0;
  std::vector<std::string> slow_ranks;
  std::vector<std::string> compress;
  double compress_cost = DiagnosisOptions{}.compress_ns_per_byte;
  std::uint32_t ranks = 0;
  bool prioritize = false;
  std::string emit;
  bool json = false;
};

// TENSOR:FACTOR of --compress.
std::pair<std::string, double> parse_compress(const std::string& c) {
  const auto colon = c.rfind(':');
  double k = 0;
  try {
    k = colon == std::string::npos ? 0 : std::stod(c.substr(colon + 1));
  } catch (const std::exception&) {
    k = 0;
  }
  if (!(k >= 1) || !std::isfinite(k) || colon == 0) {
    throw std::invalid_argument("--compress '" + c + "': expected TENSOR:FACTOR with a factor of at least 1, like bucket0:4");
  }
  return {c.substr(0, colon), k};
}

int simulate_command(const SimulateArgs& a) {
  if (a.ranks > 0 && !a.compress.empty()) throw std::invalid_argument("--compress works on the profile's own ops, not with --ranks");
  if (a.ranks > 0 && a.prioritize) throw std::invalid_argument("--prioritize orders the profile's own sends, not with --ranks");
  if (a.ranks > 0 && !a.emit.empty()) throw std::invalid_argument("--emit writes the profile's own ops, not a pattern made again with --ranks");
  if (!a.emit.empty()) check_output_path(a.emit, {a.profile});
  Profile p = load_profile_or_throw(a.profile);
  FlowModel link;
  link.bps = rate_option("--link-rate", a.link_rate);
  link.latency = duration_option("--latency", a.latency);
  link.per_message = duration_option("--per-message", a.per_message);
  const auto t_build = std::chrono::steady_clock::now();
  std::vector<std::string> changes;
  SimGraph g;
  if (a.ranks > 0) {
    // The same pattern at another size, made again from the profile's synth options.
    SynthArgs sa;
    try {
      sa = synth_args_of(p.metadata.generator);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--ranks: " + a.profile + ": " + e.what());
    }
    sa.ranks = a.ranks;
    if (a.iterations > 0) sa.iterations = a.iterations;
    g = synthesize_graph(load_model(sa.model), synth_options(sa), link);
    changes.push_back(fmt::format("the same {} at {} ranks ({} ops per iteration)", sa.pattern, g.ranks, g.ops.size()));
    p.ops.clear();  // the ops are the graph's now
    p.ranks.assign(g.ranks, Rank{});
    for (RankId r = 0; r < g.ranks; ++r) p.ranks[r].id = r;
  } else {
    // The what-ifs change the profile itself, so that --emit can write what was simulated.
    for (const auto& [rank, factor] : parse_slow_ranks(a.slow_ranks, static_cast<RankId>(p.ranks.size()))) {
      for (Op& op : p.ops) {
        if (op.type != OpType::compute || op.rank != rank) continue;
        const auto stretch = [f = factor](Nanos d) { return static_cast<Nanos>(std::llround(static_cast<double>(d) * f)); };
        op.duration = stretch(op.duration);
        for (Nanos& d : op.durations) d = stretch(d);
      }
      changes.push_back(fmt::format("rank {} computes {}x slower", rank, factor));
    }
    for (const std::string& c : a.compress) {
      const auto [name, k] = parse_compress(c);
      const std::size_t hit = compress_sends(p, name, k, a.compress_cost);
      if (hit == 0) throw std::invalid_argument("--compress '" + c + "': no send of " + a.profile + " carries a tensor (or, without one, has an id) '" + name + "'");
      changes.push_back(fmt::format("{} compressed {}x ({} messages, {} ns per byte at the sender)", name, k, hit, a.compress_cost));
    }
    if (a.prioritize) {
      p.index();
      const std::size_t changed = prioritize_sends(p, urgency_priorities(p, std::vector<FlowModel>(p.flows.size(), link)));
      changes.push_back(fmt::format("sends by urgency, critical path first ({} given another priority)", changed));
    }
    if (!a.emit.empty()) {
      if (!changes.empty()) {
        std::string what;
        for (const std::string& c : changes) what += (what.empty() ? "" : ", ") + c;
        p.metadata.description = (p.metadata.description.empty() ? "" : p.metadata.description + "; ") + "what-if: " + what;
        p.metadata.generator.clear();  // it no longer makes this profile (nor does the fusion hint)
      }
      p.index();
      write_file_atomic(a.emit, write_profile_yaml(p));
    }
    g = sim_graph(p, link);
  }
  const double build_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
  if (a.iterations > 0) g.iterations = a.iterations;
  // The simulation keeps every op's times of every iteration: bounded before it
  // starts (100 million iterations of four ops took 3.9 GB, 2^32 ran out).
  constexpr std::uint64_t kMostOpIterations = 128'000'000;
  if (g.iterations > 0 && g.ops.size() > kMostOpIterations / g.iterations) {
    throw std::invalid_argument(std::string(a.iterations > 0 ? "--iterations: " : "") + std::to_string(g.iterations) + " iterations of " +
                                std::to_string(g.ops.size()) + " ops are more than the " + std::to_string(kMostOpIterations) +
                                " op-iterations a simulation may hold" + (a.iterations > 0 ? "" : " (fewer with --iterations)"));
  }
  if (a.shared) g.rank_links = uniform_links(g.ranks, link.bps);
  if (a.ranks > 0) {
    for (const auto& [rank, factor] : parse_slow_ranks(a.slow_ranks, g.ranks)) {
      for (OpIndex o = 0; o < g.ops.size(); ++o) {
        if (g.ops[o].type != OpType::compute || g.ops[o].rank != rank) continue;
        std::vector<Nanos> v;
        const auto& node = g.ops[o];
        for (std::uint32_t k = 0; k < node.dur_count; ++k) v.push_back(static_cast<Nanos>(static_cast<double>(g.durations[node.dur_begin + k]) * factor));
        g.set_durations(o, v);
      }
      changes.push_back(fmt::format("rank {} computes {}x slower", rank, factor));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const GraphSimRun r = simulate_graph(g);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto times = r.iteration_times();
  const double mean = r.mean_iteration(times.size() > 1 ? 1 : 0);
  if (a.json) {
    nlohmann::json j{{"profile", a.profile}, {"ranks", g.ranks}, {"ops", g.ops.size()}, {"iterations", times.size()},
                     {"iteration_ns", times}, {"mean_iteration_ns", mean}, {"makespan_ns", r.makespan}, {"events", r.events},
                     {"seconds", secs}, {"build_seconds", build_secs}, {"changes", changes}};
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  fmt::print("{}: {} ranks, {} ops, {} iterations at {} per flow{}\n", a.profile, g.ranks, g.ops.size(), times.size(),
             human_rate(link.bps), a.shared ? " (each rank's link shared by its flows)" : "");
  for (const std::string& c : changes) fmt::print("what-if: {}\n", c);
  fmt::print("mean iteration {} (after the first), makespan {}\n", human_duration(static_cast<Nanos>(mean)), human_duration(r.makespan));
  fmt::print("{} events in {:.3f} s ({:.2f} M events/s), after {:.3f} s making the graph\n", r.events, secs,
             secs > 0 ? static_cast<double>(r.events) / secs / 1e6 : 0.0, build_secs);
  return 0;
}

}  // namespace

void add_analyze_commands(CLI::App& app, Action& action) {
  auto a = std::make_shared<AnalyzeArgs>();
  CLI::App* c = app.add_subcommand("analyze", "Diagnose a job: stragglers, slow links and their cost, the critical path, the verdict, what to compress");
  c->footer(
      "  tensorwire analyze RUN_DIR | CAPTURE_DIR... | PROFILE.yaml [--json]\n"
      "Fits a model to every flow's messages, checks that simulating the job as measured reproduces its\n"
      "iteration time, and puts one cause at a time (a rank's compute, a host pair's links) back to its\n"
      "measured timing against an ideal where every rank and link is at its peers' median: that cause's\n"
      "impact. A cause is named (*) when its impact is at least --threshold of the ideal iteration time.\n"
      "The critical path and the verdict come from the same simulation; the compression ranking compresses\n"
      "one tensor (or DDP bucket) at a time; the order hint gives every send its urgency (critical path first).\n"
      "The fusion hint remakes a DDP ring with bucket caps of 1 to 200 MiB: a synthesised one from its\n"
      "generator, a captured one as its twin (buckets from the ring's segment sizes, compute fitted).\n"
      "docs/analysis.md gives the method and its validation.");
  c->add_option("sources", a->sources, "A run directory, capture directories (one per host), or a profile")->required();
  c->add_flag("--json", a->json, "Machine-readable output");
  c->add_option("--json-out", a->json_out, "Also write the JSON to this file (for `report --analysis`)");
  c->add_option("--threshold", a->options.threshold, "Share of the ideal iteration time above which a cause is named")
      ->capture_default_str()
      ->check(finite_range(0.0, 1.0));
  c->add_option("--compress-cost", a->options.compress_ns_per_byte, "Compression cost, ns per uncompressed byte (both ends)")
      ->capture_default_str()
      ->check(finite_range(0.0, 1000.0));
  c->add_option("--warmup", a->options.warmup, "Iterations left out of the means")->capture_default_str();
  c->add_option("--threads", a->options.threads,
                "Threads for the what-if simulations and the fusion hint's (default: one per core, as many as fit in 4 GiB; the results do not depend on it)")
      ->check(CLI::Range(1U, 1024U));
  c->add_option("--link-rate", a->link_rate, "A profile without observed timings is simulated at this rate")->capture_default_str();
  c->add_option("--emit-mitigated", a->emit_mitigated,
                "Write a changed profile that works around what was found (a ring order that avoids a slow pair, else the "
                "order hint's send priorities or the top tensor compressed 4x, whichever the simulator says saves more), "
                "with its predicted gain; replay it to measure the real one");
  c->callback([&action, a] { action = [a] { return analyze_command(*a); }; });

  auto s = std::make_shared<SimulateArgs>();
  CLI::App* m = app.add_subcommand("simulate", "Simulate a profile on a link model, with what-ifs");
  m->footer(
      "  tensorwire simulate PROFILE [--link-rate R] [--latency D] [--per-message D] [--shared]\n"
      "                     [--slow-rank R:F]... [--compress TENSOR:K]... [--prioritize] [--iterations N] [--emit OUT.yaml] [--json]\n"
      "Every flow moves one message at a time at --link-rate, after --per-message, arriving --latency after\n"
      "its last bit; with --shared the flows of a rank share one link of that rate each way (max-min fair).");
  m->add_option("profile", s->profile, "The profile (YAML)")->required();
  m->add_option("--link-rate", s->link_rate, "Rate of every flow (or rank link with --shared)")->capture_default_str();
  m->add_option("--latency", s->latency, "One-way latency of every message")->capture_default_str();
  m->add_option("--per-message", s->per_message, "Time a message holds its flow before its bits")->capture_default_str();
  m->add_flag("--shared", s->shared, "A rank's flows share its link (egress and ingress)");
  m->add_option("--iterations", s->iterations, "Iterations to simulate (default: the profile's)")
      ->check(CLI::Range(std::uint64_t{0}, limits::kMaxIterations));
  m->add_option("--slow-rank", s->slow_ranks, "RANK:FACTOR: stretch one rank's compute (repeatable)");
  m->add_option("--ranks", s->ranks, "Simulate the same pattern at this many ranks (a synthesised profile: from its metadata.generator)")
      ->check(CLI::Range(2, 4096));
  m->add_option("--compress", s->compress,
                "TENSOR:FACTOR: divide the bytes of a tensor's sends (by their tensor label, else their op id; repeatable)");
  m->add_option("--compress-cost", s->compress_cost, "Compression cost, ns per uncompressed byte, added to each compressed send's gap")
      ->capture_default_str()
      ->check(finite_range(0.0, 1000.0));
  m->add_flag("--prioritize", s->prioritize,
              "Give every send its urgency as priority (critical path first, the order hint of `analyze`): of the sends "
              "waiting on a flow, the most urgent goes first");
  m->add_option("--emit", s->emit, "Write the profile as changed by --slow-rank, --compress and --prioritize (replay it to measure the what-if)");
  m->add_flag("--json", s->json, "Machine-readable output");
  m->callback([&action, s] { action = [s] { return simulate_command(*s); }; });
}

}  // namespace tw::cli

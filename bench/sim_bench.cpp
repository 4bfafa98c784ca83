// How fast the what-if simulator runs: the synthesised ResNet-50 ring all-reduce
// (DDP buckets, Gloo's segments) at 4 to 1024 ranks, one iteration. Baselines in
// the same run: the Executor-based simulator (the agents' own rules, one state
// per rank, each on its slice of the profile) up to 256 ranks, and a binary heap pushing and popping as many events
// as the simulation handled (the floor of any discrete-event simulator).
// Targets (issue 14): at least a million events a second; 1024 ranks, graph
// made and simulated, in under 10 s. Then links shared max-min: N workers each
// push one message to a parameter server at once, or 1 us apart, over the
// server's 10 Gb/s links, against the Executor-based simulator's sharing. Then
// the diagnosis of a synthesised job, its what-ifs on one thread against all cores.
// Prints a Markdown fragment for docs/BENCHMARKS.md.
//   sim_bench [RUNS]
#include <cstdio>
#include <queue>
#include <chrono>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "timing.hpp"
#include "tensorwire/analysis/diagnosis.hpp"
#include "tensorwire/analysis/graph_sim.hpp"
#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/profile/model.hpp"
#include "tensorwire/profile/synth.hpp"

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::stoi(argv[1]) : 3;
  const tw::Model model = tw::load_model("resnet50");
  std::printf("## What-if simulator\n\n");
  std::printf("ResNet-50 ring all-reduce as `profile synth` makes it (25 MiB DDP buckets, Gloo segments of at most 1 MiB),\n");
  std::printf("one iteration, every flow at 10 Gb/s; median of %d runs. *Heap floor*: pushing and popping as many\n", runs);
  std::printf("events through a binary heap. *Executor-based*: analysis/simulator.hpp on the same profile.\n");
  std::printf("The graph's and the simulation's per-op arrays are filled once and are large (at 1024 ranks the\n");
  std::printf("nodes alone are 1.2 GB): they are reserved with transparent huge pages advised (util/heap.hpp,\n");
  std::printf("reserve_huge), a page fault per 2 MiB. With 4 KiB pages (2026-12-04, same machine, one run of each build,\n");
  std::printf("one after the other) making the graph took 8.04 s at 1024 ranks and 373 ms at 256, against 3.63 s and 40 ms.\n");
  std::printf("The kernel zeroing those pages as they are first touched was most of the time at 1024 ranks (perf: 33%%\n");
  std::printf("of this benchmark's samples). A node now keeps what only some ops have (measured lags, holds, paths,\n");
  std::printf("compression costs) beside it (56 bytes, was 96), and the simulation's per-op state and successor lists\n");
  std::printf("take 16 and 8 bytes, not 24 and 12, without temporary arrays (2026-12-06, same machine, one run of the\n");
  std::printf("build before and one of the build of this table, one after the other, 1-minute load 0.30 at the start):\n");
  std::printf("the whole benchmark's peak memory went from 3.52 to 2.28 GB, and the 1024-rank row from 12.22 s to 7.24 s.\n\n");
  std::string load_at_start = tw::bench::load1();
  std::printf("| ranks | ops | events | make the graph | simulate | events/s | heap floor | Executor-based | total (target < 10 s at 1024) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const std::uint32_t n : {4u, 16u, 64u, 256u, 1024u}) {
    tw::SynthOptions o;
    o.ranks = n;
    o.iterations = 1;
    tw::FlowModel link;
    tw::SimGraph g;
    const double make = tw::bench::median_seconds(runs, [&] { g = tw::synthesize_graph(model, o, link); });
    std::uint64_t events = 0;
    const double sim = tw::bench::median_seconds(runs, [&] { events = tw::simulate_graph(g).events; });
    const double floor = tw::bench::median_seconds(runs, [&] {
      std::priority_queue<std::pair<std::int64_t, std::uint64_t>, std::vector<std::pair<std::int64_t, std::uint64_t>>, std::greater<>> heap;
      std::mt19937_64 rng(1);
      std::int64_t now = 0;
      const std::uint64_t width = std::max<std::uint64_t>(1, n * 4);  // events in flight, as the simulation keeps them
      for (std::uint64_t i = 0; i < width; ++i) heap.push({static_cast<std::int64_t>(rng() % 1000000), i});
      for (std::uint64_t i = width; i < events; ++i) {
        now = heap.top().first;
        heap.pop();
        heap.push({now + static_cast<std::int64_t>(rng() % 1000000), i});
      }
    });
    std::string executor = "-";
    if (n <= 256) {
      const tw::Profile p = tw::synthesize(model, o);
      tw::SimOptions so;
      const double t = tw::bench::median_seconds(runs, [&] { (void)tw::simulate(p, so); });
      executor = tw::bench::seconds_text(t);
    }
    std::printf("| %u | %zu | %llu | %s | %s | %.2f M | %s | %s | %s |\n", n, g.ops.size(), static_cast<unsigned long long>(events),
                tw::bench::seconds_text(make).c_str(), tw::bench::seconds_text(sim).c_str(), static_cast<double>(events) / sim / 1e6,
                tw::bench::seconds_text(floor).c_str(), executor.c_str(), tw::bench::seconds_text(make + sim).c_str());
    std::fflush(stdout);
  }

  tw::bench::print_table_load(load_at_start);
  std::printf("\nShared links: N workers (ranks 1 to N) each push 10 MB to rank 0, a parameter server\n");
  std::printf("whose egress and ingress are shared max-min at 10 Gb/s; two iterations. *Together*: every push\n");
  std::printf("starts at once (they also end together); *staggered*: worker k computes k us first, so every\n");
  std::printf("start and end changes the others' rates. Median of %d runs.\n", runs);
  std::printf("Before the sharing kept one pending end per group of coupled messages and shared out each\n");
  std::printf("instant once (2026-12-06, same machine, one run each): `analyze` of 1000 one-message flows\n");
  std::printf("between two ranks (about 25 simulations) took 15.5 s and 57 MB, 2000 took 70 s; now 0.09 s\n");
  std::printf("and 0.20 s. Staggered starts still re-rate their group at every change (O(N) each).\n\n");
  load_at_start = tw::bench::load1();
  std::printf("| pushes in flight | together: events | together | staggered | Executor-based together | Executor-based staggered |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const std::uint32_t n : {64u, 256u, 1024u, 4096u}) {
    std::string together_text, staggered_text;
    for (int staggered = 0; staggered < 2; ++staggered) {
      std::string t = "version: 1\niterations: 2\nranks: [{id: 0}";
      for (std::uint32_t k = 1; k <= n; ++k) t += ", {id: " + std::to_string(k) + "}";
      t += "]\nflows:\n";
      for (std::uint32_t k = 1; k <= n; ++k) t += "  - {id: f" + std::to_string(k) + ", src: " + std::to_string(k) + ", dst: 0}\n";
      t += "ops:\n";
      for (std::uint32_t k = 1; k <= n; ++k) {
        const std::string after = staggered ? ", after: [c" + std::to_string(k) + "]" : "";
        if (staggered) t += "  - {id: c" + std::to_string(k) + ", type: compute, rank: " + std::to_string(k) + ", duration: " + std::to_string(k) + "us}\n";
        t += "  - {id: s" + std::to_string(k) + ", type: send, flow: f" + std::to_string(k) + ", bytes: 10MB" + after + "}\n";
      }
      (staggered ? staggered_text : together_text) = std::move(t);
    }
    std::uint64_t events = 0;
    double graph_s[2] = {0, 0}, exec_s[2] = {-1, -1};
    for (int staggered = 0; staggered < 2; ++staggered) {
      tw::ProfileLoad l = tw::load_profile_text(staggered ? staggered_text : together_text, "ps.yaml");
      if (!l.ok()) {
        std::fprintf(stderr, "%s\n", l.diagnostics.empty() ? "bad profile" : l.diagnostics[0].str().c_str());
        return 1;
      }
      const tw::Profile& p = *l.profile;
      tw::FlowModel flow;
      flow.bps = 100e9;  // the flows are not the limit; the server's links are
      tw::SimGraph g = tw::sim_graph(p, flow);
      g.rank_links.assign(p.ranks.size(), tw::RankLink{0, 0});
      g.rank_links[0] = {10e9, 10e9};
      graph_s[staggered] = tw::bench::median_seconds(runs, [&] {
        const tw::GraphSimRun r = tw::simulate_graph(g);
        if (!staggered) events = r.events;
      });
      if (n <= 1024) {
        tw::SimOptions so;
        so.links.assign(p.ranks.size(), tw::RankLink{1e15, 1e15});
        so.links[0] = {10e9, 10e9};
        exec_s[staggered] = tw::bench::median_seconds(runs, [&] { (void)tw::simulate(p, so); });
      }
    }
    const auto text = [](double s) { return s < 0 ? std::string("-") : tw::bench::seconds_text(s); };
    std::printf("| %u | %llu | %s | %s | %s | %s |\n", n, static_cast<unsigned long long>(events), text(graph_s[0]).c_str(),
                text(graph_s[1]).c_str(), text(exec_s[0]).c_str(), text(exec_s[1]).c_str());
    std::fflush(stdout);
  }

  tw::bench::print_table_load(load_at_start);

  // The diagnosis: its what-ifs on one thread against all the cores, alternating.
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  std::printf("\nThe diagnosis (`analyze`): a synthesised job, 10 iterations, whose timeline is the Executor-based\n");
  std::printf("simulation of it (as `analyze` makes it for a profile without observed timings), diagnosed with its\n");
  std::printf("what-if simulations on one thread and on all %u cores (DiagnosisOptions::threads, `--threads`);\n", cores);
  std::printf("median of %d runs, alternating. The JSON of the two is compared, and the table says if it differs.\n\n", runs);
  load_at_start = tw::bench::load1();
  std::printf("| job | ops per iteration | 1 thread | %u threads | speed-up | same result |\n", cores);
  std::printf("|---|---|---|---|---|---|\n");
  struct Job {
    const char* label;
    const char* model;
    tw::Pattern pattern;
    std::uint32_t ranks, servers;
  };
  for (const Job& j : {Job{"ResNet-50, parameter server, 16 workers and 4 servers", "resnet50", tw::Pattern::parameter_server, 16, 4},
                       Job{"ResNet-50, parameter server, 64 workers and 4 servers", "resnet50", tw::Pattern::parameter_server, 64, 4},
                       Job{"ResNet-50, ring all-reduce, 16 ranks", "resnet50", tw::Pattern::ring_allreduce, 16, 1}}) {
    tw::SynthOptions o;
    o.pattern = j.pattern;
    o.ranks = j.ranks;
    o.servers = j.servers;
    o.iterations = 10;
    const tw::Profile p = tw::synthesize(tw::load_model(j.model), o);
    tw::DiagnosisInput in;
    in.profile = p;
    const tw::SimResult r = tw::simulate(p, tw::SimOptions{});
    in.measured = tw::timeline_from_simulation(p, r, "bench");
    in.measured.iteration = r.iteration_times();
    in.source = "bench";
    std::vector<double> one, all;
    std::string one_json, all_json;
    for (int k = 0; k < runs; ++k) {
      for (const unsigned threads : {1U, cores}) {
        tw::DiagnosisOptions d;
        d.threads = threads;
        const auto a = std::chrono::steady_clock::now();
        const tw::Diagnosis dg = tw::diagnose(in, d);
        (threads == 1 ? one : all).push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
        (threads == 1 ? one_json : all_json) = tw::diagnosis_json(dg, p).dump();
      }
    }
    const double t1 = tw::bench::median(one), tn = tw::bench::median(all);
    std::printf("| %s | %zu | %s | %s | %.2fx | %s |\n", j.label, p.ops.size(), tw::bench::seconds_text(t1).c_str(),
                tw::bench::seconds_text(tn).c_str(), t1 / tn, one_json == all_json ? "yes" : "NO");
    std::fflush(stdout);
  }
  tw::bench::print_table_load(load_at_start);
  return 0;
}

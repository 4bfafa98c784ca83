// What one agent's set-up message costs, step by step, against the bytes it
// carries: the controller cutting and writing a rank's slice and encoding its
// setup message, the agent decoding the message and loading the slice. A ring's
// slice grows with its ranks (each rank sends 2(N-1) messages per bucket).
//
// An agent does its steps once, in a fresh process, where every page its heap
// touches for the first time is a page fault: so the agent's steps are timed in
// a fresh process of this program (`--cold FILE`), with the faults they take,
// beside the same steps repeated in one process (warm), with glibc's defaults
// and as tensorwire runs them (reuse_freed_memory()). Baseline, in the same
// fresh-process way: touching as many new pages as the steps faulted.
// Prints a Markdown fragment for docs/BENCHMARKS.md.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/profile_slice.hpp"
#include "tensorwire/profile/synth.hpp"
#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/util/heap.hpp"
#include "timing.hpp"

namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "setup_bench: %s\n", why.c_str());
  std::exit(1);
}

long faults() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt + u.ru_majflt;
}

// The agent's two steps on a setup message.
void decode(const std::string& text, std::string& slice) {
  const auto d = tw::decode_controller_message(text);
  if (!d) fail(d.error);
  slice = std::get<tw::control::Setup>(*d.message).profile;
}
void load(const std::string& slice) {
  const tw::ProfileLoad l = tw::load_profile_text(slice, "slice");
  if (!l.ok()) fail(l.diagnostics.front().str());
}

double ms_since(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

// In a fresh process: the steps once; prints "decode_ms load_ms faults".
int cold(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string text = std::move(s).str();
  std::string slice;
  const long f0 = faults();
  const auto a = std::chrono::steady_clock::now();
  decode(text, slice);
  const double dec = ms_since(a);
  const auto b = std::chrono::steady_clock::now();
  load(slice);
  const double ld = ms_since(b);
  std::printf("%.3f %.3f %ld\n", dec, ld, faults() - f0);
  return 0;
}

// In a fresh process: touches `pages` new pages; prints the milliseconds.
int touch(long pages) {
  const std::size_t n = static_cast<std::size_t>(pages) * 4096;
  const auto a = std::chrono::steady_clock::now();
  std::unique_ptr<char[]> p(new char[n]);
  for (std::size_t i = 0; i < n; i += 4096) p[i] = 1;
  const double t = ms_since(a);
  std::printf("%.3f\n", t + (p[n / 2] == 7 ? 1e-9 : 0));
  return 0;
}

std::vector<double> run_self(const std::string& self, const std::string& args) {
  const std::string cmd = "'" + self + "' " + args;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) fail("cannot run " + cmd);
  std::vector<double> v;
  double x = 0;
  while (std::fscanf(f, "%lf", &x) == 1) v.push_back(x);
  if (::pclose(f) != 0) fail(cmd + " failed");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--cold") == 0) return cold(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "--cold-kept") == 0) {
    tw::reuse_freed_memory();  // as tensorwire's main() does
    return cold(argv[2]);
  }
  if (argc == 3 && std::strcmp(argv[1], "--touch") == 0) return touch(std::stol(argv[2]));
  const int runs = argc > 1 ? std::stoi(argv[1]) : 5;
  std::vector<std::uint32_t> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(static_cast<std::uint32_t>(std::stoul(argv[i])));
  if (sizes.empty()) sizes = {8, 64, 256};
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const auto file = std::filesystem::temp_directory_path() / ("tw-setup-bench-" + std::to_string(::getpid()));

  std::printf("## Set-up message of one agent\n\n");
  std::printf("Rank 0's slice of a 1-iteration ring all-reduce of the MLP model (`profile synth --model mlp`), "
              "median of %d runs (`bench/setup_bench %d`). The controller finds every rank's part of the profile in one "
              "pass before the launch, then cuts, writes and encodes each rank's slice from its part as its setup is "
              "sent (so that it never holds all the slices, each listing every rank); the agent decodes the message and loads its "
              "slice once, in a fresh process (cold: every page its heap touches is a first touch, a page fault), "
              "shown beside the same steps repeated in one process (warm), with glibc's defaults and as tensorwire "
              "runs them (freed memory kept for reuse: `reuse_freed_memory()`). Baseline: a fresh process touching as "
              "many new pages as the cold steps with glibc's defaults faulted.\n\n",
              runs, runs);
  std::printf("| ranks | message | controller: slice + YAML | controller: encode | agent, warm: decode + load "
              "| agent, cold, glibc defaults | page faults | baseline: touching them | agent, cold, freed memory kept "
              "| page faults | cold per MB |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::uint32_t n : sizes) {
    tw::SynthOptions o;
    o.ranks = n;
    o.iterations = 1;
    const tw::Profile p = tw::synthesize(tw::load_model("mlp"), o);
    std::string yaml;
    tw::IndexRuns ops;
    const std::vector<tw::SliceParts> parts = tw::slice_parts(p);  // before the launch
    const double cut = 1e3 * tw::bench::median_seconds(runs, [&] {
      tw::ProfileSlice s = tw::slice_profile(p, 0, parts[0]);
      yaml = tw::write_profile_yaml(s.profile);
      ops = tw::index_runs(s.global);
    });
    tw::control::Setup m;
    m.run = "bench";
    m.profile = yaml;
    m.ops = ops;
    m.profile_ops = p.ops.size();
    m.data_token = std::string(64, 'x');
    for (std::uint32_t r = 0; r < n; ++r) m.roster.push_back({r, "10.77.0." + std::to_string(r % 250 + 1), 40000});
    std::string text;
    const double enc = 1e3 * tw::bench::median_seconds(runs, [&] { text = tw::encode(tw::ControllerMessage{m}); });
    std::string slice;
    const double warm = 1e3 * tw::bench::median_seconds(runs, [&] {
      decode(text, slice);
      load(slice);
    });
    if (slice != yaml) fail("the decoded slice differs from the sent one");
    tw::write_file_atomic(file.string(), text);
    std::vector<double> cold_ms, cold_faults, touch_ms, kept_ms, kept_faults;
    for (int i = 0; i < runs; ++i) {
      const auto c = run_self(self, "--cold '" + file.string() + "'");
      if (c.size() != 3) fail("unexpected output of --cold");
      cold_ms.push_back(c[0] + c[1]);
      cold_faults.push_back(c[2]);
      const auto t = run_self(self, "--touch " + std::to_string(static_cast<long>(c[2])));
      if (t.size() != 1) fail("unexpected output of --touch");
      touch_ms.push_back(t[0]);
      const auto k = run_self(self, "--cold-kept '" + file.string() + "'");
      if (k.size() != 3) fail("unexpected output of --cold-kept");
      kept_ms.push_back(k[0] + k[1]);
      kept_faults.push_back(k[2]);
    }
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("| %u | %.1f kB | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.0f | %.2f ms | %.2f ms | %.0f | %.1f ms |\n", n,
                static_cast<double>(text.size()) / 1e3, cut, enc, warm, tw::bench::median(cold_ms), tw::bench::median(cold_faults), tw::bench::median(touch_ms),
                tw::bench::median(kept_ms), tw::bench::median(kept_faults), tw::bench::median(kept_ms) / mb);
  }
  std::filesystem::remove(file);
  return 0;
}

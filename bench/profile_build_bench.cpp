// How fast `profile build` turns a large capture into a profile: a Gloo ring of
// R ranks written as a capture directory (trace files with send and receive
// events and the shim's samples of each call, as a real capture holds them),
// then read and built. The baseline, in the same run: reading the same directory
// and delimiting its messages (read_capture_dir + analyse_capture, what
// `trace show` does), which the build includes. Prints a Markdown fragment for
// docs/BENCHMARKS.md.
//   profile_build_bench [MESSAGES] [RANKS] [RUNS]
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/trace.hpp"
#include "synthetic_capture.hpp"
#include "timing.hpp"
#include "tensorwire/profile/build.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const std::size_t messages = argc > 1 ? std::stoul(argv[1]) : 1'000'000;
  const auto ranks = static_cast<std::uint32_t>(argc > 2 ? std::stoul(argv[2]) : 4);
  const int runs = argc > 3 ? std::stoi(argv[3]) : 3;
  const std::string dir = (fs::temp_directory_path() / "tw-bench-capture").string();
  fs::remove_all(dir);
  const std::size_t written = tw::bench::write_capture(dir, messages, ranks);
  std::uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.is_regular_file() ? e.file_size() : 0;

  std::size_t found = 0;
  const double read = tw::bench::median_seconds(runs, [&] {
    const auto traces = tw::read_capture_dir(dir);
    found = tw::analyse_capture(traces).messages.size();
  });
  tw::BuiltProfile b;
  const double build = tw::bench::median_seconds(runs, [&] { b = tw::build_profile(tw::read_captures({dir}), {}); });
  fs::remove_all(dir);
  if (found != written) {
    std::fprintf(stderr, "profile_build_bench: wrote %zu messages, the reader found %zu\n", written, found);
    return 1;
  }
  std::printf("## Building a profile from a capture\n\n");
  std::printf("`profile_build_bench %zu %u %d`: a Gloo ring of %u ranks as a capture directory (%.0f MB of trace\n", messages,
              ranks, runs, ranks, static_cast<double>(bytes) / 1e6);
  std::printf("files: send and receive events and the shim's samples), %zu messages (data ops and their notifications)\n",
              written);
  std::printf("over %llu iterations. Median of %d runs each. The build includes the reading and delimiting of the\n",
              static_cast<unsigned long long>(b.report.detected), runs);
  std::printf("baseline row.\n\n");
  std::printf("| step | time | messages per second |\n|---|---|---|\n");
  std::printf("| read the capture and delimit its messages (`trace show`'s part; baseline) | %.2f s | %.2f M |\n", read,
              static_cast<double>(written) / read / 1e6);
  std::printf("| `profile build`: the above, iterations, dependencies, observed timings | %.2f s | %.2f M |\n", build,
              static_cast<double>(written) / build / 1e6);
  std::printf("\nThe profile: %zu ranks, %zu flows, %zu ops per iteration, %llu iterations used (target: 1 M messages in\n",
              b.profile.ranks.size(), b.profile.flows.size(), b.profile.ops.size(),
              static_cast<unsigned long long>(b.profile.iterations));
  std::printf("under 10 s).\n");
  return 0;
}

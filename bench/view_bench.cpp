// How fast `tensorwire view` turns a large capture into a Perfetto timeline, and
// how large the file is: the synthetic Gloo ring of profile_build_bench, read,
// understood as a job (ranks, clocks, iterations), drawn and written as
// protobuf (deflated, then as it is) and as JSON. The baseline, in the same run:
// reading the directory and delimiting its messages (what `trace show` does),
// which the view includes. Prints a Markdown fragment for docs/BENCHMARKS.md.
//   view_bench [MESSAGES] [RANKS] [RUNS]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>

#include "synthetic_capture.hpp"
#include "timing.hpp"
#include "tensorwire/view/sources.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::size_t messages = argc > 1 ? std::stoul(argv[1]) : 1'000'000;
  const auto ranks = static_cast<std::uint32_t>(argc > 2 ? std::stoul(argv[2]) : 4);
  const int runs = argc > 3 ? std::stoi(argv[3]) : 3;
  const std::string dir = (fs::temp_directory_path() / "tw-bench-view").string();
  const std::string out = dir + ".pftrace";
  fs::remove_all(dir);
  const std::size_t written = tw::bench::write_capture(dir, messages, ranks);
  std::size_t found = 0;
  const double read = tw::bench::median_seconds(runs, [&] { found = tw::analyse_capture(tw::read_capture_dir(dir)).messages.size(); });
  tw::view::ViewCounts counts;
  std::uint64_t packed = 0, raw = 0;
  const auto write = [&](bool json, bool compress) {
    const tw::view::View v = tw::view::view_of({dir}, {}, &counts);
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    if (json) {
      tw::view::write_trace_json(v, f);
    } else {
      (compress ? packed : raw) = tw::view::write_perfetto(v, f, {.compress = compress});
    }
  };
  const double view = tw::bench::median_seconds(runs, [&] { write(false, true); });
  const double view_raw = tw::bench::median_seconds(runs, [&] { write(false, false); });
  const double view_json = tw::bench::median_seconds(runs, [&] { write(true, false); });
  const auto json_bytes = fs::file_size(out);
  fs::remove_all(dir);
  fs::remove(out);
  if (found != written || counts.messages != written) {
    std::fprintf(stderr, "view_bench: wrote %zu messages, the reader found %zu, the view drew %zu\n", written, found, counts.messages);
    return 1;
  }
  const double n = static_cast<double>(written);
  std::printf("## Timelines of a capture (`tensorwire view`)\n\n");
  std::printf("`view_bench %zu %u %d`: the Gloo ring of `profile_build_bench` (%u ranks, %zu messages with their\n", messages, ranks, runs,
              ranks, written);
  std::printf("reads, a flow each, iterations found from the traffic), read, drawn and written. Median of %d runs each;\n", runs);
  std::printf("each row includes the reading of the first. The synthetic capture has no wire tap: its messages have no\n");
  std::printf("stage slices (a message with three stages costs under 150 bytes before deflating: tests/unit/view_test.cpp).\n\n");
  std::printf("| step | time | file | bytes per message |\n|---|---|---|---|\n");
  std::printf("| read the capture and delimit its messages (`trace show`'s part; baseline) | %.2f s | | |\n", read);
  std::printf("| `view -o t.pftrace`: Perfetto protobuf, deflated (default) | %.2f s | %.1f MB | %.0f |\n", view, static_cast<double>(packed) / 1e6,
              static_cast<double>(packed) / n);
  std::printf("| `view --no-compress -o t.pftrace` | %.2f s | %.1f MB | %.0f |\n", view_raw, static_cast<double>(raw) / 1e6,
              static_cast<double>(raw) / n);
  std::printf("| `view -o t.json`: trace-event JSON | %.2f s | %.1f MB | %.0f |\n", view_json, static_cast<double>(json_bytes) / 1e6,
              static_cast<double>(json_bytes) / n);
  std::printf("\nTargets: 1 M messages written in under 10 s, at most 150 bytes per message in the protobuf file.\n");
  return 0;
}

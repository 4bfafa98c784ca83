// How fast, and in how much memory, `tensorwire trace import` reads a profiler's
// Chrome trace: a synthetic PyTorch-like trace (complete "X" events of kernels and
// operators, epoch timestamps in microseconds, args as the profiler writes them),
// imported as the command does (streamed through nlohmann's SAX interface).
// Baselines in the same run: nlohmann's parser building the document from the
// text in memory (how the import read it until 2026-12-07), and the same parser
// with the depth callback that bounded nesting before that. Peak resident memory
// is the process's (getrusage), taken after the import and then after the
// document's parse. Prints a Markdown fragment for docs/BENCHMARKS.md.
//   chrome_import_bench [EVENTS] [RUNS]
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "tensorwire/capture/chrome_trace.hpp"
#include "timing.hpp"

namespace {

// The process's peak resident memory so far, in MB.
double peak_mb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void write_trace(const std::string& path, std::size_t events) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << R"({"schemaVersion": 1, "deviceProperties": [], "traceEvents": [)" << '\n';
  const long long base = 1'765'000'000'000'000LL;  // microseconds since the epoch
  for (std::size_t i = 0; i < events; ++i) {
    const bool kernel = i % 3 == 0;
    f << (i ? ",\n" : "") << R"(  {"ph": "X", "cat": ")" << (kernel ? "kernel" : "cpu_op") << R"(", "name": ")"
      << (kernel ? "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>" : "aten::add_")
      << R"(", "pid": )" << (kernel ? 0 : 4242) << R"(, "tid": )" << (kernel ? 7 : 4242) << R"(, "ts": )" << base + static_cast<long long>(i) * 3
      << ".250, \"dur\": 2.125, \"args\": {\"External id\": " << i << ", \"Sequence number\": " << i / 2
      << R"(, "Fwd thread id": 0, "grid": [128, 1, 1], "block": [256, 1, 1], "stream": 7}})";
  }
  f << "\n]}\n";
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::size_t events = argc > 1 ? std::stoul(argv[1]) : 250'000;
  const int runs = argc > 2 ? std::stoi(argv[2]) : 3;
  std::string dir = (fs::temp_directory_path() / "tw-bench-chrome.XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror("chrome_import_bench: mkdtemp");
    return 1;
  }
  const std::string path = dir + "/trace.json";
  write_trace(path, events);
  const auto bytes = fs::file_size(path);
  std::size_t imported = 0;
  const double before = peak_mb();
  const double ours = tw::bench::median_seconds(runs, [&] {
    imported = tw::import_chrome_trace(path, {.pid = 1, .start_ns = std::nullopt}, {}, 0, 0).size();
  });
  const double ours_peak = peak_mb();
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::size_t parsed = 0;
  const double parse = tw::bench::median_seconds(runs, [&] { parsed = nlohmann::json::parse(text)["traceEvents"].size(); });
  const double parse_peak = peak_mb();
  // Once: it takes tens of seconds.
  const double with_callback = tw::bench::median_seconds(1, [&] {
    std::ifstream in(path, std::ios::binary);
    const nlohmann::json::parser_callback_t shallow = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > 64) throw std::runtime_error("too deep");
      return true;
    };
    parsed = nlohmann::json::parse(in, shallow)["traceEvents"].size();
  });
  fs::remove_all(dir);
  if (imported != events || parsed != events) {
    std::fprintf(stderr, "chrome_import_bench: wrote %zu events, imported %zu, parsed %zu\n", events, imported, parsed);
    return 1;
  }
  std::printf("## Importing a profiler's Chrome trace (`tensorwire trace import`)\n\n");
  std::printf("`chrome_import_bench %zu %d`: a synthetic PyTorch-like Chrome trace of %zu complete events (%.1f MB),\n", events, runs,
              events, static_cast<double>(bytes) / 1e6);
  std::printf("read as it streams (nlohmann's SAX interface) and turned into ops as `trace import` does (median of %d runs).\n", runs);
  std::printf("Baselines in the same run: nlohmann's parser building the trace's document from the text in memory, as the\n");
  std::printf("import did until 2026-12-07 (median of %d), and the same parser with the depth callback that bounded nesting\n", runs);
  std::printf("before that (one run). Peak resident memory: the process's, after the imports, then after the document's parses\n");
  std::printf("(which add the text, %.0f MB, held beside it); %.0f MB before either.\n\n", static_cast<double>(bytes) / 1e6, before);
  std::printf("| what | time | events per second | peak memory |\n|---|---|---|---|\n");
  const double n = static_cast<double>(events);
  std::printf("| `trace import`'s reading of the trace | %.2f s | %.0f k | %.0f MB |\n", ours, n / ours / 1e3, ours_peak);
  std::printf("| baseline: nlohmann::json::parse into a document, text in memory | %.2f s | %.0f k | %.0f MB |\n", parse, n / parse / 1e3,
              parse_peak);
  std::printf("| nlohmann::json::parse from the file with a depth callback (before) | %.2f s | %.0f k | |\n\n", with_callback,
              n / with_callback / 1e3);
  std::printf("The import takes %.2fx the document parser's time.\n", ours / parse);
  return 0;
}

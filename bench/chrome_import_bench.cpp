// How fast `tensorwire trace import` reads a profiler's Chrome trace: a synthetic
// PyTorch-like trace (complete "X" events of kernels and operators, epoch
// timestamps in microseconds, args as the profiler writes them), imported as the
// command does. Baselines in the same run: nlohmann's parser alone on the text in
// memory (what an import cannot avoid), and the same parser with the depth
// callback that bounded nesting until 2026-12-07. Prints a Markdown fragment for
// docs/BENCHMARKS.md.
//   chrome_import_bench [EVENTS] [RUNS]
#include <nlohmann/json.hpp>

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
  const double ours = tw::bench::median_seconds(runs, [&] {
    imported = tw::import_chrome_trace(path, {.pid = 1, .start_ns = std::nullopt}, {}, 0, 0).size();
  });
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::size_t parsed = 0;
  const double parse = tw::bench::median_seconds(runs, [&] { parsed = nlohmann::json::parse(text)["traceEvents"].size(); });
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
  std::printf("read, its nesting bounded, parsed and turned into ops as `trace import` does (median of %d runs).\n", runs);
  std::printf("Baselines in the same run: nlohmann's parser alone on the text already in memory (median of %d), and\n", runs);
  std::printf("the same parser with the depth callback that bounded nesting until 2026-12-07 (one run).\n\n");
  std::printf("| what | time | events per second |\n|---|---|---|\n");
  const double n = static_cast<double>(events);
  std::printf("| `trace import`'s reading of the trace | %.2f s | %.0f k |\n", ours, n / ours / 1e3);
  std::printf("| baseline: nlohmann::json::parse, text in memory | %.2f s | %.0f k |\n", parse, n / parse / 1e3);
  std::printf("| nlohmann::json::parse from the file with a depth callback (before) | %.2f s | %.0f k |\n\n", with_callback,
              n / with_callback / 1e3);
  std::printf("The import takes %.2fx the parser's time alone.\n", ours / parse);
  return 0;
}

// `tensorwire capture -- CMD` and `tensorwire trace show DIR`.
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.hpp"
#include "tensorwire/core/output_check.hpp"
#include "tensorwire/view/chakra.hpp"
#include "tensorwire/view/diagnosis_input.hpp"
#include "tensorwire/capture/capture_session.hpp"
#include "tensorwire/capture/chrome_trace.hpp"
#include "tensorwire/capture/trace_report.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/view/pcapng.hpp"
#include "tensorwire/view/sources.hpp"

namespace tw::cli {
namespace {

namespace fs = std::filesystem;

struct CaptureArgs {
  CaptureOptions capture;
  bool no_samples = false;
  bool quiet = false;
};

int capture_command(const CaptureArgs& a) {
  CaptureOptions o = a.capture;
  o.samples = !a.no_samples;
  CaptureSession session(o);
  const int status = session.run();
  if (!a.quiet) fmt::print(stderr, "{}\n", session.summary());
  return exit_code_of(status);
}

struct ShowArgs {
  std::string dir;
  bool json = false;
  double gap_us = 100;
};

int show_command(const ShowArgs& a) {
  const CaptureReading c = read_capture(a.dir, static_cast<Nanos>(a.gap_us * 1e3));
  if (a.json) {
    write_trace_report_json(c, [](std::string_view piece) { fmt::print("{}", piece); });
    fmt::print("\n");
  } else {
    fmt::print("{}", trace_report_text(c, read_imported_ops(a.dir)));
  }
  return 0;
}

struct ImportArgs {
  std::string dir, file, name;
  int pid = 0;
  std::int64_t start_ns = 0;
};

int import_command(const ImportArgs& a) {
  const auto traces = read_capture_dir(a.dir);
  if (traces.empty()) throw std::runtime_error(a.dir + ": no traces (trace-PID.json) in it");
  // The span of every capture that wrote into the directory.
  Nanos begin = 0, end = 0;
  for (const std::string& file : capture_dir::session_files(a.dir)) {
    const nlohmann::json c = read_json_file(file);
    const Nanos b = json_int(c, "started_ns", file), e = json_int(c, "ended_ns", file);
    if (b && (!begin || b < begin)) begin = b;
    if (e > end) end = e;
  }
  ImportOptions o;
  if (a.pid) {
    if (std::none_of(traces.begin(), traces.end(), [&](const ProcessTrace& t) { return t.pid == a.pid; })) {
      throw std::invalid_argument("--pid " + std::to_string(a.pid) + ": no such process in " + a.dir);
    }
    o.pid = a.pid;
  }
  if (a.start_ns) o.start_ns = a.start_ns;
  const auto ops = import_chrome_trace(a.file, o, traces, begin, end);
  std::string name = a.name.empty() ? fs::path(a.file).stem().string() : a.name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  write_imported_ops(a.dir, name, fs::absolute(a.file).string(), ops);
  fmt::print(stderr, "tensorwire trace import: {} ops from {} into {}/ops-{}.json\n", ops.size(), a.file, a.dir, name);
  return 0;
}

struct ExportArgs {
  std::string dir, out;
  double gap_us = 100;
};

// The timeline of `tensorwire view DIR -o FILE.json`, kept under its old name.
int export_command(const ExportArgs& a) {
  view::Selection s;
  s.gap = static_cast<Nanos>(a.gap_us * 1e3);
  view::ViewCounts counts;
  check_output_path(a.out, {a.dir});
  const view::View v = view::view_of({a.dir}, s, &counts);
  std::ostringstream out;
  view::write_trace_json(v, out);
  write_file_atomic(a.out, out.str());
  fmt::print(stderr, "tensorwire trace export: {} messages, {} slices in {} (open it in ui.perfetto.dev or chrome://tracing; "
             "`tensorwire view` writes Perfetto's protobuf too)\n", counts.messages, v.slice_count(), a.out);
  return 0;
}

struct ChakraArgs {
  std::vector<std::string> sources;
  std::string prefix;
};

int chakra_command(const ChakraArgs& a) {
  check_output_path(a.prefix + ".0.et", a.sources);
  const DiagnosisInput in = view::diagnosis_input(a.sources, 10e9);
  const view::ChakraCounts c = view::write_chakra(in.profile, in.measured, a.prefix);
  fmt::print(stderr, "tensorwire trace chakra: {} files {}.0.et ..., {} compute, {} send and {} receive nodes, {} dependencies\n", c.files,
             a.prefix, c.compute, c.sends, c.recvs, c.dependencies);
  return 0;
}

struct PcapngArgs {
  std::vector<std::string> dirs;
  std::string out;
};

int pcapng_command(const PcapngArgs& a) {
  check_output_path(a.out, a.dirs);
  std::ostringstream out;
  const view::PcapngCounts n = view::write_pcapng(a.dirs, out);
  write_file_atomic(a.out, out.str());
  fmt::print(stderr, "tensorwire trace pcapng: {} frames of {} capture files in {}, {} of them with their message in a comment (open it in Wireshark)\n",
             n.frames, n.files, a.out, n.annotated);
  return 0;
}

}  // namespace

void add_capture_commands(CLI::App& app, Action& action) {
  auto a = std::make_shared<CaptureArgs>();
  CLI::App* c = app.add_subcommand("capture", "Run a job with every TCP socket call traced (LD_PRELOAD), unchanged");
  c->footer(
      "  tensorwire capture --out DIR [--wire auto|IFACE,...|off] [--append] [--no-samples] -- python3 train.py ...\n"
      "Child processes are traced too (the preload is inherited). One trace per process in DIR, and the\n"
      "wire tap's TCP headers in DIR/wire-IFACE-HOST-PID.pcap (docs/trace-format.md); the exit status is the job's.\n"
      "A DIR holding a capture is refused unless --append: then captures (one per host or rank, at once or\n"
      "one after another) keep their own files there, and trace show reads them together.\n"
      "Ctrl-C goes to the job, which flushes on exit. python/ is put on PYTHONPATH: a job may\n"
      "`import tensorwire.annotate` to mark iterations, compute spans and DDP buckets.\n"
      "Then: tensorwire trace show DIR; trace import DIR profiler.json; trace export DIR -o trace.json");
  c->add_option("--out", a->capture.out, "Directory for the traces")->required();
  c->add_option("--wire", a->capture.wire,
                "Wire tap (libpcap, TCP headers only): auto (every interface, loopback included; skipped with a\n"
                "warning without permission), IFACE,IFACE... (must work), or off")
      ->capture_default_str();
  c->add_flag("--append", a->capture.append, "Add to a directory that holds a capture already (its files are kept)");
  c->add_flag("--no-samples", a->no_samples,
              "Keep none of the job's data: no sample events (by default each send call's first 32 and last 16 bytes)");
  c->add_flag("--quiet", a->quiet, "No summary at the end");
  c->add_option("command", a->capture.command, "The job, after --")->required();
  c->callback([&action, a] { action = [a] { return capture_command(*a); }; });

  CLI::App* t = app.add_subcommand("trace", "Inspect captured traces");
  t->require_subcommand(0, 1);
  auto s = std::make_shared<ShowArgs>();
  CLI::App* show = t->add_subcommand("show", "Processes, connections, messages and their timing in a capture");
  show->add_option("dir", s->dir, "Capture directory")->required();
  show->add_flag("--json", s->json, "Machine-readable output");
  show->add_option("--gap-us", s->gap_us, "Send calls closer than this belong to one message")
      ->capture_default_str()
      ->check(finite_range(0.0, 1e6));
  show->callback([&action, s] { action = [s] { return show_command(*s); }; });

  auto im = std::make_shared<ImportArgs>();
  CLI::App* imp = t->add_subcommand("import", "Attach a profiler's Chrome-trace JSON (PyTorch, TensorFlow, Horovod) to a capture");
  imp->footer(
      "  tensorwire trace import DIR profile.json [--pid PID] [--start-ns NS]\n"
      "Complete (X) and begin/end (B/E) events become ops on the capture's clock, in DIR/ops-NAME.json.\n"
      "Timestamps in microseconds since the epoch are used as they are; relative ones (PyTorch 1.13's\n"
      "legacy profiler) need --start-ns, the profile's time 0 on CLOCK_REALTIME (time.time_ns()).\n"
      "Ops go to the process whose pid the event names, or all to --pid.");
  imp->add_option("dir", im->dir, "Capture directory")->required();
  imp->add_option("file", im->file, "Chrome-trace JSON file")->required();
  imp->add_option("--pid", im->pid, "The captured process the ops belong to");
  imp->add_option("--start-ns", im->start_ns, "CLOCK_REALTIME nanoseconds of the profile's time 0 (relative timestamps)");
  imp->add_option("--name", im->name, "Name of the import (default: the file's name)");
  imp->callback([&action, im] { action = [im] { return import_command(*im); }; });

  auto ex = std::make_shared<ExportArgs>();
  CLI::App* exp = t->add_subcommand("export", "Write a capture as trace-event JSON for Perfetto or chrome://tracing (as `tensorwire view DIR -o FILE.json`)");
  exp->add_option("dir", ex->dir, "Capture directory")->required();
  exp->add_option("-o,--out", ex->out, "Output JSON file")->required();
  exp->add_option("--gap-us", ex->gap_us, "Send calls closer than this belong to one message")
      ->capture_default_str()
      ->check(finite_range(0.0, 1e6));
  exp->callback([&action, ex] { action = [ex] { return export_command(*ex); }; });

  auto pn = std::make_shared<PcapngArgs>();
  CLI::App* png = t->add_subcommand("pcapng", "Write the capture's wire tap as pcapng for Wireshark, each data segment's message in a comment");
  png->footer(
      "  tensorwire trace pcapng DIR... -o wire.pcapng\n"
      "Every frame the wire tap captured, as it was, one interface per capture file; each data segment of a\n"
      "traced connection carries a packet comment: its ranks, which message of the connection it belongs to\n"
      "and where in it, and its iteration and DDP bucket when known (Wireshark: frame.comment).");
  png->add_option("dirs", pn->dirs, "Capture directories (one per host)")->required();
  png->add_option("-o,--out", pn->out, "Output pcapng file")->required();
  png->callback([&action, pn] { action = [pn] { return pcapng_command(*pn); }; });

  auto ch = std::make_shared<ChakraArgs>();
  CLI::App* ct = t->add_subcommand("chakra", "Write a job as MLCommons Chakra execution traces (one file per rank) for ASTRA-sim");
  ct->footer(
      "  tensorwire trace chakra CAPTURE_DIR... | RUN_DIR | PROFILE.yaml -o PREFIX\n"
      "Writes PREFIX.0.et ... one per rank: one iteration's compute ops (COMP_NODE, each at its measured median\n"
      "duration) and messages (COMM_SEND_NODE on the sender, COMM_RECV_NODE on the receiver, with comm_src,\n"
      "comm_dst, comm_size and comm_tag), their dependencies as data_deps (docs/analysis.md, \"Chakra\").");
  ct->add_option("sources", ch->sources, "Capture directories (one per host), a run directory, or a profile")->required();
  ct->add_option("-o,--out", ch->prefix, "Prefix of the files")->required();
  ct->callback([&action, ch] { action = [ch] { return chakra_command(*ch); }; });
}

}  // namespace tw::cli

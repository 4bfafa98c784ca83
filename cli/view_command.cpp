// `tensorwire view SOURCE -o timeline.pftrace`: a timeline of a capture, a run or
// a built profile for Perfetto (docs/view.md).
#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "command.hpp"
#include "tensorwire/core/output_check.hpp"
#include "tensorwire/util/output_path.hpp"
#include "tensorwire/view/sources.hpp"

namespace tw::cli {
namespace {

namespace fs = std::filesystem;

struct ViewArgs {
  std::vector<std::string> sources;
  std::vector<std::string> against;
  std::string out, iterations, ranks, flows, format = "auto";
  std::size_t counter_points = 2000;
  double gap_us = 100;
  bool no_compress = false;
};

int view_command(const ViewArgs& a) {
  {
    std::vector<std::string> inputs = a.sources;
    inputs.insert(inputs.end(), a.against.begin(), a.against.end());
    check_output_path(a.out, inputs);
  }
  view::Selection s;
  if (!a.iterations.empty()) s.iterations = view::parse_iterations(a.iterations);
  if (!a.ranks.empty()) s.ranks = view::parse_ranks(a.ranks);
  if (!a.flows.empty()) s.flows = view::parse_flows(a.flows);
  s.counter_points = a.counter_points;
  s.gap = static_cast<Nanos>(a.gap_us * 1e3);
  std::string format = a.format;
  if (format == "auto") format = a.out.ends_with(".json") ? "json" : "perfetto";
  view::ViewCounts counts;
  view::View v = view::view_of(a.sources, s, &counts);
  if (!a.against.empty()) {
    view::View o = view::view_of(a.against, s);
    // Named by what they are ("run", "capture", "profile"): the reader sees which is which.
    const std::string mine = view::source_kind(a.sources[0]), theirs = view::source_kind(a.against[0]);
    // A run or profile of a capture's iterations A..B: its iteration 0 is the capture's A.
    std::int64_t offset = 0;
    if (theirs == "capture" && mine != "capture") {
      try {
        offset = build_profile(read_captures(a.against), {}).report.first_used;
      } catch (const std::runtime_error&) {
        offset = 0;  // no profile can be built of it: aligned at the first iterations
      }
    }
    view::append_against(v, mine, std::move(o), theirs == mine ? theirs + " (against)" : theirs, offset);
  }
  // Written beside the destination, then renamed: a full disk leaves no half file.
  // A device or a FIFO (/dev/null, /dev/stdout) is written in place, never replaced.
  const bool in_place = written_in_place(a.out);
  const std::string tmp = in_place ? a.out : a.out + ".tmp-" + std::to_string(::getpid());
  std::uint64_t bytes = 0;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(a.out + ": cannot create " + tmp);
    try {
      if (format == "json") {
        view::write_trace_json(v, out);
      } else {
        bytes = view::write_perfetto(v, out, {.compress = !a.no_compress});
      }
      out.flush();
    } catch (const std::logic_error& e) {  // the writer refused the view: a bug of ours, not of the input
      out.close();
      if (!in_place) fs::remove(tmp);
      throw std::runtime_error(a.sources[0] + ": cannot be drawn (" + e.what() + "; a tensorwire bug, please report it)");
    } catch (...) {
      out.close();
      if (!in_place) fs::remove(tmp);
      throw;
    }
    if (!out) {
      if (!in_place) fs::remove(tmp);
      throw std::runtime_error(a.out + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  if (!in_place) fs::rename(tmp, a.out, ec);
  if (ec) {
    fs::remove(tmp);
    throw std::runtime_error(a.out + ": " + ec.message());
  }
  if (!bytes) bytes = fs::file_size(a.out, ec);
  fmt::print(stderr, "tensorwire view: {} messages, {} receipts, {} compute ops, {} iterations{}; {} flows, {} counter samples in {} ({})\n",
             counts.messages, counts.receipts, counts.compute, counts.iterations, a.against.empty() ? "" : " (and the source against it)",
             v.flows.size(), v.sample_count(), a.out, human_bytes(bytes));
  if (v.unlinked) {
    fmt::print(stderr,
               "{} flows not drawn: their end came before their start, by up to {} (two hosts' clocks differ by up to their "
               "bound, and an agent that does not spin sets its timers early by its usual wake-up delay)\n",
               v.unlinked, human_duration(v.unlinked_by));
  }
  fmt::print(stderr, "open it in ui.perfetto.dev{}\n", format == "json" ? " or chrome://tracing" : "");
  return 0;
}

}  // namespace

void add_view_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ViewArgs>();
  CLI::App* c = app.add_subcommand("view", "Write a timeline of a capture, a run or a built profile for Perfetto (protobuf or JSON)");
  c->footer(
      "  tensorwire view CAPTURE_DIR... | RUN_DIR | PROFILE.yaml -o timeline.pftrace [--against ORIGINAL]\n"
      "A process per rank (or traced process); per connection its messages, each with its stages (queued in\n"
      "the local stack, on the wire, awaiting the ACK) when the wire tap or transmit timestamps saw them,\n"
      "the receiver's reads, flows from each send to its read and (runs, profiles) from each dependency to\n"
      "the op that waited for it; compute, iterations, annotations, and counters (throughput, cwnd,\n"
      "unacknowledged and not yet sent bytes). OUT ending in .json: the legacy trace-event JSON, which\n"
      "chrome://tracing opens too. Several capture directories: one job captured on several hosts.\n"
      "Open the file in ui.perfetto.dev (it stays on your machine). docs/view.md says what each track shows.");
  c->add_option("sources", a->sources, "Capture directories (one per host), a run directory, or a built profile")->required();
  c->add_option("-o,--out", a->out, "Timeline to write (.pftrace: Perfetto protobuf; .json: trace-event JSON)")->required();
  c->add_option("--against", a->against, "A second source (the original of a run: its capture directories, or its profile) drawn beside it, its first "
                "iteration lined up with the source's (a capture's: the first its profile used)");
  c->add_option("--iterations", a->iterations, "A:B: only iterations A to B-1");
  c->add_option("--ranks", a->ranks, "R,R,...: only these ranks");
  c->add_option("--flows", a->flows, "S-D,...: only the messages from rank S to rank D");
  c->add_option("--format", a->format, "perfetto, json, or auto (by OUT's extension)")->check(CLI::IsMember({"auto", "perfetto", "json"}));
  c->add_option("--counter-points", a->counter_points, "Samples kept per counter track (thinned over the time shown)")
      ->capture_default_str()->check(CLI::Range(10, 1'000'000));
  c->add_option("--gap-us", a->gap_us, "Captures: send calls closer than this are one message (as trace show)")
      ->capture_default_str()
      ->check(finite_range(0.0, 1e6));
  c->add_flag("--no-compress", a->no_compress, "Protobuf packets as they are, not deflated in chunks");
  c->callback([&action, a] { action = [a] { return view_command(*a); }; });
}

}  // namespace tw::cli

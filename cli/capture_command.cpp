// `tensorwire capture -- CMD` and `tensorwire trace show DIR`.
#include <fmt/core.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "replay_options.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/capture/chrome_trace.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/capture/wire_tap.hpp"
#include "tensorwire/controller/control.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/text_table.hpp"
#include "tensorwire/launch/child_process.hpp"

namespace tw::cli {
namespace {

namespace fs = std::filesystem;

struct CaptureArgs {
  std::string out;
  std::string wire = "auto";
  std::vector<std::string> command;
  bool quiet = false;
};

// The shim next to the binary (build tree or install), or TW_CAPTURE_LIB.
std::string shim_path() {
  if (const char* p = std::getenv("TW_CAPTURE_LIB")) return p;
  const fs::path exe = fs::path(self_exe()).parent_path();
  for (const fs::path& candidate : {exe / "../capture/libtensorwire_capture.so", exe / "../lib/tensorwire/libtensorwire_capture.so",
                                    exe / "libtensorwire_capture.so"}) {
    if (fs::exists(candidate)) return fs::canonical(candidate).string();
  }
  throw std::runtime_error("cannot find libtensorwire_capture.so next to " + exe.string() + " (set TW_CAPTURE_LIB)");
}

// --wire: auto (every interface, loopback included), off, or IFACE,IFACE...
std::vector<std::string> tap_interfaces(const std::string& wire) {
  if (wire == "off") return {};
  if (wire == "auto") return {"any"};
  std::vector<std::string> out;
  std::string cur;
  for (char c : wire + ",") {
    if (c != ',') {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (out.empty()) throw std::invalid_argument("--wire " + wire + ": give auto, off, or interface names like lo,eth0");
  return out;
}

// python/ (the annotation module) in the source tree or the install, or TW_PYTHON_DIR.
std::string python_dir() {
  if (const char* p = std::getenv("TW_PYTHON_DIR")) return p;
  const fs::path exe = fs::path(self_exe()).parent_path();
  for (const fs::path& candidate : {exe / "../../python", exe / "../lib/tensorwire/python", exe / "../python"}) {
    if (fs::exists(candidate / "tensorwire/annotate.py")) return fs::canonical(candidate).string();
  }
  return {};
}

int capture_command(const CaptureArgs& a) {
  if (a.command.empty()) throw std::invalid_argument("give the job to run after --, like: tensorwire capture --out DIR -- python3 train.py");
  const std::vector<std::string> ifaces = tap_interfaces(a.wire);
  fs::create_directories(a.out);
  const std::string dir = fs::canonical(a.out).string();
  const std::string shim = shim_path();
  std::string preload = shim;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;

  // The tap is running before the job's first SYN, so every connection maps onto
  // its stream. Asked for by name, it must work; on auto, the job runs without it.
  nlohmann::json wire = {{"mode", a.wire}};
  std::unique_ptr<WireTap> tap;
  if (!ifaces.empty()) {
    try {
      tap = WireTap::start({.interfaces = ifaces, .dir = dir});
    } catch (const std::runtime_error& e) {
      if (a.wire != "auto") throw;
      wire["error"] = e.what();
      fmt::print(stderr, "tensorwire capture: no wire tap ({}); the traces hold the application's events and TCP_INFO only\n",
                 e.what());
    }
  }

  SpawnOptions so;
  so.env = {"LD_PRELOAD=" + preload, "TW_CAPTURE_DIR=" + dir};
  if (const std::string py = python_dir(); !py.empty()) {  // import tensorwire.annotate
    const char* old = std::getenv("PYTHONPATH");
    so.env.push_back("PYTHONPATH=" + py + (old && *old ? std::string(":") + old : std::string()));
  }
  so.die_with_parent = false;  // the job's life is its own
  const Nanos t0 = realtime_ns();
  ChildProcess job = ChildProcess::spawn(a.command, so);
  // Ctrl-C reaches the job from the terminal; this process waits for it to end.
  // (Ignored only now: the job must not inherit the ignoring.)
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  const int status = job.wait();
  const Nanos t1 = realtime_ns();
  if (tap) {
    // The last acknowledgements follow the job's last send by a round trip.
    const WireTapReport r = tap->stop(200 * kMilli);
    wire.update(r.to_json());
    if (!r.error.empty()) fmt::print(stderr, "tensorwire capture: wire tap: {}\n", r.error);
  }
  nlohmann::json j = {{"command", a.command}, {"started_ns", t0},  {"ended_ns", t1},
                      {"exit", ChildProcess::describe(status)}, {"wire", wire}, {"shim", shim}};
  // The job has run: whatever goes wrong with the capture now is reported, and the
  // exit status stays the job's. The shim stops writing on a full disk without a
  // word (it cannot block or fail the job): say it here.
  if (struct statvfs st{}; ::statvfs(dir.c_str(), &st) == 0 && st.f_bavail * st.f_frsize < 64 * 1024) {
    fmt::print(stderr, "tensorwire capture: {}: {}; the traces and wire data stop where the space ran out\n", dir,
               std::strerror(ENOSPC));
  }
  try {
    write_file_atomic(capture_dir::capture_file(dir), j.dump(2) + "\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "tensorwire capture: {}; the capture in {} is incomplete\n", e.what(), dir);
  }
  if (!a.quiet) {
    try {
      const auto traces = read_capture_dir(dir);
      std::uint64_t events = 0, dropped = 0;
      for (const auto& t : traces) {
        events += t.event_count();
        dropped += t.events_dropped;
      }
      std::string tap_text = "no wire tap";
      if (wire.contains("packets")) {
        tap_text = fmt::format("wire tap: {} packets, {} lost", wire["packets"].get<std::uint64_t>(), wire["dropped"].get<std::uint64_t>());
      }
      fmt::print(stderr, "tensorwire capture: the job {}; {} process(es) traced, {} events, {} dropped; {}; traces in {}\n",
                 ChildProcess::describe(status), traces.size(), events, dropped, tap_text, dir);
    } catch (const std::exception& e) {
      fmt::print(stderr, "tensorwire capture: the job {}; reading the traces back: {}\n", ChildProcess::describe(status), e.what());
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

struct ShowArgs {
  std::string dir;
  bool json = false;
  double gap_us = 100;
};


// Per connection: the distributions trace show prints, from its messages.
struct ConnTimes {
  std::uint64_t messages = 0;
  std::uint32_t retransmits = 0;
  std::vector<Nanos> in_send, queued, on_wire, ack_wait, to_peer;
};

std::vector<ConnTimes> connection_times(const CaptureAnalysis& an) {
  std::vector<ConnTimes> out(an.connections.size());
  for (const Message& m : an.messages) {
    ConnTimes& c = out[m.connection];
    ++c.messages;
    c.retransmits += m.retransmits;
    c.in_send.push_back(m.sent_app - m.ready);
    if (m.recv_last >= 0) c.to_peer.push_back(m.recv_last - m.sent_app);
    if (m.wire_first >= 0) c.queued.push_back(m.wire_first - m.ready);
    if (m.wire_first >= 0 && m.wire_last >= 0) c.on_wire.push_back(m.wire_last - m.wire_first);
    if (m.wire_last >= 0 && m.acked >= 0) c.ack_wait.push_back(m.acked - m.wire_last);
  }
  return out;
}

nlohmann::json distribution(const std::vector<Nanos>& v) {
  if (v.empty()) return nullptr;
  return {{"count", v.size()}, {"p50_ns", percentile(v, 0.5)}, {"p90_ns", percentile(v, 0.9)}, {"p99_ns", percentile(v, 0.99)}, {"max_ns", percentile(v, 1.0)}};
}

// The job's annotations: compute spans per rank, and per DDP bucket its bytes, how
// long its all-reduce took and the bytes its messages carried.
void print_annotations(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& an) {
  const auto dur = [](const std::vector<Nanos>& v) { return v.empty() ? std::string("-") : human_duration(percentile(v, 0.5)); };
  std::map<std::size_t, std::map<trace::MarkType, std::vector<Nanos>>> compute;
  struct Bucket {
    std::string name;
    std::int64_t bytes = 0;
    std::vector<Nanos> reduce;
    std::uint64_t sent = 0;
    std::set<std::int64_t> iterations;
  };
  // DDP rebuilds its buckets after the first iteration: a bucket is its index and contents.
  std::map<std::tuple<std::size_t, std::uint32_t, std::string, std::int64_t>, Bucket> buckets;
  for (const AnnotatedSpan& s : an.spans) {
    if (s.end < 0) continue;
    if (s.type == trace::MarkType::bucket) {
      Bucket& b = buckets[{s.process, s.aux, s.name, s.value}];
      b.name = s.name;
      b.bytes = s.value;
      b.reduce.push_back(s.end - s.begin);
    } else if (s.end > s.begin) {
      compute[s.process][s.type].push_back(s.end - s.begin);
    }
  }
  for (const Message& m : an.messages) {
    if (m.bucket_span < 0) continue;
    const AnnotatedSpan& s = an.spans[static_cast<std::size_t>(m.bucket_span)];
    Bucket& b = buckets[{s.process, s.aux, s.name, s.value}];
    b.sent += m.end - m.begin;
    b.iterations.insert(m.iteration);
  }
  TextTable t({"pid", "rank", "iterations", "iteration", "forward", "backward", "optimizer"});
  for (const auto& [p, by] : compute) {
    const auto get = [&](trace::MarkType k) {
      const auto it = by.find(k);
      return it == by.end() ? std::vector<Nanos>{} : it->second;
    };
    t.add({std::to_string(traces[p].pid), traces[p].rank_text().empty() ? "-" : traces[p].rank_text(),
           std::to_string(get(trace::MarkType::iteration).size()), dur(get(trace::MarkType::iteration)),
           dur(get(trace::MarkType::forward)), dur(get(trace::MarkType::backward)), dur(get(trace::MarkType::optimizer))});
  }
  fmt::print("\nannotated compute, p50:\n{}", t.str());
  if (buckets.empty()) return;
  TextTable b({"pid", "bucket", "first tensor", "bytes", "iterations", "ready to reduced p50", "sent per iteration"});
  for (const auto& [key, x] : buckets) {
    const std::size_t n = std::max<std::size_t>(1, x.iterations.size());
    b.add({std::to_string(traces[std::get<0>(key)].pid), std::to_string(std::get<1>(key)), x.name, human_bytes(static_cast<std::uint64_t>(x.bytes)),
           std::to_string(x.reduce.size()), dur(x.reduce), human_bytes(x.sent / n)});
  }
  fmt::print("\nDDP gradient buckets (a message belongs to the earliest-ready bucket not yet reduced):\n{}", b.str());
}

// Imported profiler ops: where each process spent its compute, top ops first.
void print_ops(const std::vector<ImportedOp>& ops) {
  std::map<int, std::map<std::string, std::pair<Nanos, std::size_t>>> by;  // pid -> name -> (total, count)
  for (const auto& op : ops) {
    auto& x = by[op.pid][op.name];
    x.first += op.end - op.begin;
    ++x.second;
  }
  TextTable t({"pid", "op", "calls", "total", "mean"});
  for (const auto& [pid, names] : by) {
    std::vector<std::pair<std::string, std::pair<Nanos, std::size_t>>> v(names.begin(), names.end());
    std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) {
      const auto& [name, tc] = v[i];
      t.add({std::to_string(pid), name.size() > 40 ? name.substr(0, 37) + "..." : name, std::to_string(tc.second), human_duration(tc.first),
             human_duration(tc.first / static_cast<Nanos>(tc.second))});
    }
  }
  fmt::print("\nimported ops (trace import), top 8 per process by total time (nested ops count in their parents too):\n{}", t.str());
}

int show_command(const ShowArgs& a) {
  const auto traces = read_capture_dir(a.dir);
  if (traces.empty()) throw std::runtime_error(a.dir + ": no traces (trace-PID.json) in it");
  const WireCapture wire = read_wire_capture(a.dir);
  const CaptureAnalysis an =
      analyse_capture(traces, static_cast<Nanos>(a.gap_us * 1e3), wire.present() ? &wire.index : nullptr);
  const std::vector<ConnTimes> times = connection_times(an);
  if (a.json) {
    nlohmann::json j;
    nlohmann::json procs = nlohmann::json::array();
    for (const auto& t : traces) {
      procs.push_back({{"pid", t.pid}, {"ppid", t.ppid}, {"host", t.host}, {"rank", t.rank_text()}, {"cmdline", t.cmdline},
                       {"final", t.final}, {"events_dropped", t.events_dropped}, {"untracked", t.untracked}});
    }
    j["processes"] = std::move(procs);
    j["wire"] = {{"mode", wire.mode},     {"status", wire.status}, {"interfaces", wire.interfaces},
                 {"frames", wire.frames}, {"dropped", wire.dropped}, {"truncated", wire.truncated}};
    nlohmann::json conns = nlohmann::json::array();
    for (std::size_t i = 0; i < an.connections.size(); ++i) {
      const Connection& c = an.connections[i];
      const ConnTimes& t = times[i];
      nlohmann::json x = {{"pid", traces[c.process].pid},   {"rank", traces[c.process].rank_text()},
                          {"local", c.local.address},        {"remote", c.remote.address},
                          {"how", c.how},                    {"role", c.role},
                          {"bytes_sent", c.bytes_sent},      {"bytes_received", c.bytes_received},
                          {"send_calls", c.send_calls},      {"recv_calls", c.recv_calls},
                          {"failed_calls", c.failed_calls},  {"messages", t.messages},
                          {"on_wire", c.on_wire},            {"wire_bytes", c.wire_bytes},
                          {"retransmits", c.retransmits},    {"retransmitted_bytes", c.retransmitted_bytes},
                          {"kernel_retransmits", c.kernel_retransmits}, {"in_send", distribution(t.in_send)},
                          {"queued", distribution(t.queued)}, {"on_wire_time", distribution(t.on_wire)},
                          {"ack_wait", distribution(t.ack_wait)}, {"to_peer", distribution(t.to_peer)}};
      if (c.peer) x["peer_pid"] = traces[an.connections[*c.peer].process].pid;
      conns.push_back(std::move(x));
    }
    j["connections"] = std::move(conns);
    nlohmann::json ms = nlohmann::json::array();
    for (const Message& m : an.messages) {
      ms.push_back({{"connection", m.connection}, {"begin", m.begin},          {"end", m.end},
                    {"calls", m.calls},           {"ready_ns", m.ready},       {"sent_app_ns", m.sent_app},
                    {"wire_first_ns", m.wire_first}, {"wire_last_ns", m.wire_last}, {"acked_ns", m.acked},
                    {"retransmits", m.retransmits}, {"recv_first_ns", m.recv_first}, {"recv_last_ns", m.recv_last},
                    {"iteration", m.iteration}, {"bucket_span", m.bucket_span}});
    }
    j["messages"] = std::move(ms);
    nlohmann::json sp = nlohmann::json::array();
    for (const AnnotatedSpan& x : an.spans) {
      sp.push_back({{"pid", traces[x.process].pid}, {"type", mark_type_name(x.type)}, {"name", x.name}, {"value", x.value},
                    {"index", x.aux}, {"begin_ns", x.begin}, {"end_ns", x.end}});
    }
    j["spans"] = std::move(sp);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  TextTable p({"pid", "rank", "command", "events", "dropped", "complete"});
  for (const auto& t : traces) {
    std::string cmd;
    for (const auto& w : t.cmdline) cmd += (cmd.empty() ? "" : " ") + w;
    if (cmd.size() > 48) cmd = cmd.substr(0, 45) + "...";
    p.add({std::to_string(t.pid), t.rank_text().empty() ? "-" : t.rank_text(), cmd,
           std::to_string(t.event_count()), std::to_string(t.events_dropped),
           t.final ? "yes" : "no (killed?)"});
  }
  fmt::print("{}\n", p.str());
  const auto dur = [](const std::vector<Nanos>& v) {
    return v.empty() ? std::string("-") : human_duration(percentile(v, 0.5)) + " / " + human_duration(percentile(v, 0.99));
  };
  TextTable c({"pid", "rank", "role", "local", "remote", "sent", "received", "messages", "retrans wire/kernel", "on wire"});
  TextTable d({"pid", "local", "remote", "in send", "queued", "wire", "ack", "to peer"});
  for (std::size_t i = 0; i < an.connections.size(); ++i) {
    const Connection& x = an.connections[i];
    if (x.bytes_sent + x.bytes_received == 0) continue;
    const std::string pid = std::to_string(traces[x.process].pid);
    std::string seen = "-";
    if (x.on_wire) seen = x.bytes_sent ? fmt::format("{:.0f}%", 100.0 * static_cast<double>(std::min(x.wire_bytes, x.bytes_sent)) /
                                                                    static_cast<double>(x.bytes_sent))
                                       : "yes";
    c.add({pid, traces[x.process].rank_text().empty() ? "-" : traces[x.process].rank_text(), x.role, x.local.address,
           x.remote.address, human_bytes(x.bytes_sent), human_bytes(x.bytes_received), std::to_string(times[i].messages),
           fmt::format("{} / {}", x.on_wire ? std::to_string(x.retransmits) : "-", x.kernel_retransmits), seen});
    if (times[i].messages == 0) continue;
    d.add({pid, x.local.address, x.remote.address, dur(times[i].in_send), dur(times[i].queued), dur(times[i].on_wire),
           dur(times[i].ack_wait), dur(times[i].to_peer)});
  }
  fmt::print("{}\n", c.str());
  fmt::print("message timing, p50 / p99 per connection that sent:\n{}", d.str());
  fmt::print("\nmessages: send calls less than {} apart on one connection. in send: first call entered to last\n"
             "call returned; queued: first call entered to its first byte on the wire; wire: first to last byte\n"
             "on the wire; ack: last byte on the wire to the ACK covering it; to peer: last call returned to the\n"
             "peer reading the last byte. retrans: frames that carried bytes again on the wire / the kernel's\n"
             "count of retransmitted segments (TCP_INFO, last snapshot; it includes copies dropped before the wire).\n",
             human_duration(static_cast<Nanos>(a.gap_us * 1e3)));
  if (!an.spans.empty()) print_annotations(traces, an);
  if (const auto ops = read_imported_ops(a.dir); !ops.empty()) print_ops(ops);
  if (!wire.present()) {
    fmt::print("wire tap: {}; queued, wire and ack times are not known.\n", wire.status.empty() ? "none" : wire.status);
  } else {
    fmt::print("wire tap on {}: {} frames, {} lost in the kernel{}{}\n", fmt::join(wire.interfaces, ","), wire.frames, wire.dropped,
               wire.truncated ? "; a file was cut short" : "", wire.status.empty() ? "" : "; " + wire.status);
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
  Nanos begin = 0, end = 0;
  if (std::ifstream cf(capture_dir::capture_file(a.dir)); cf) {
    const nlohmann::json c = nlohmann::json::parse(cf, nullptr, false);
    if (c.is_object()) {
      begin = c.value("started_ns", Nanos{0});
      end = c.value("ended_ns", Nanos{0});
    }
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

int export_command(const ExportArgs& a) {
  const auto traces = read_capture_dir(a.dir);
  if (traces.empty()) throw std::runtime_error(a.dir + ": no traces (trace-PID.json) in it");
  const WireCapture wire = read_wire_capture(a.dir);
  const CaptureAnalysis an = analyse_capture(traces, static_cast<Nanos>(a.gap_us * 1e3), wire.present() ? &wire.index : nullptr);
  const nlohmann::json j = export_chrome_trace(traces, an, read_imported_ops(a.dir));
  write_file_atomic(a.out, j.dump() + "\n");
  fmt::print(stderr, "tensorwire trace export: {} events in {} (open it in ui.perfetto.dev or chrome://tracing)\n",
             j["traceEvents"].size(), a.out);
  return 0;
}

}  // namespace

void add_capture_commands(CLI::App& app, Action& action) {
  auto a = std::make_shared<CaptureArgs>();
  CLI::App* c = app.add_subcommand("capture", "Run a job with every TCP socket call traced (LD_PRELOAD), unchanged");
  c->footer(
      "  tensorwire capture --out DIR [--wire auto|IFACE,...|off] -- python3 train.py ...\n"
      "Child processes are traced too (the preload is inherited). One trace per process in DIR, and the\n"
      "wire tap's TCP headers in DIR/wire-IFACE.pcap (docs/trace-format.md); the exit status is the job's.\n"
      "Ctrl-C goes to the job, which flushes on exit. python/ is put on PYTHONPATH: a job may\n"
      "`import tensorwire.annotate` to mark iterations, compute spans and DDP buckets.\n"
      "Then: tensorwire trace show DIR; trace import DIR profiler.json; trace export DIR -o trace.json");
  c->add_option("--out", a->out, "Directory for the traces")->required();
  c->add_option("--wire", a->wire,
                "Wire tap (libpcap, TCP headers only): auto (every interface, loopback included; skipped with a\n"
                "warning without permission), IFACE,IFACE... (must work), or off")
      ->capture_default_str();
  c->add_flag("--quiet", a->quiet, "No summary at the end");
  c->add_option("command", a->command, "The job, after --")->required();
  c->callback([&action, a] { action = [a] { return capture_command(*a); }; });

  CLI::App* t = app.add_subcommand("trace", "Inspect captured traces");
  t->require_subcommand(0, 1);
  auto s = std::make_shared<ShowArgs>();
  CLI::App* show = t->add_subcommand("show", "Processes, connections, messages and their timing in a capture");
  show->add_option("dir", s->dir, "Capture directory")->required();
  show->add_flag("--json", s->json, "Machine-readable output");
  show->add_option("--gap-us", s->gap_us, "Send calls closer than this belong to one message")->capture_default_str();
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
  CLI::App* exp = t->add_subcommand("export", "Write a capture as Chrome-trace JSON for Perfetto: messages, annotations, imported ops");
  exp->add_option("dir", ex->dir, "Capture directory")->required();
  exp->add_option("-o,--out", ex->out, "Output JSON file")->required();
  exp->add_option("--gap-us", ex->gap_us, "Send calls closer than this belong to one message")->capture_default_str();
  exp->callback([&action, ex] { action = [ex] { return export_command(*ex); }; });
}

}  // namespace tw::cli

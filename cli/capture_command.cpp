// `tensorwire capture -- CMD` and `tensorwire trace show DIR`.
#include <fmt/core.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "replay_options.hpp"
#include "tensorwire/capture/trace.hpp"
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

int capture_command(const CaptureArgs& a) {
  if (a.command.empty()) throw std::invalid_argument("give the job to run after --, like: tensorwire capture --out DIR -- python3 train.py");
  if (a.wire != "auto" && a.wire != "off") {
    throw std::invalid_argument("--wire " + a.wire + ": the wire tap is not available in this version; use --wire off or auto");
  }
  fs::create_directories(a.out);
  const std::string dir = fs::canonical(a.out).string();
  const std::string shim = shim_path();
  std::string preload = shim;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  SpawnOptions so;
  so.env = {"LD_PRELOAD=" + preload, "TW_CAPTURE_DIR=" + dir};
  so.die_with_parent = false;  // the job's life is its own
  const Nanos t0 = realtime_ns();
  ChildProcess job = ChildProcess::spawn(a.command, so);
  // Ctrl-C reaches the job from the terminal; this process waits for it to end.
  // (Ignored only now: the job must not inherit the ignoring.)
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  const int status = job.wait();
  const Nanos t1 = realtime_ns();
  nlohmann::json j = {{"command", a.command}, {"started_ns", t0},  {"ended_ns", t1},
                      {"exit", ChildProcess::describe(status)}, {"wire", "off"}, {"shim", shim}};
  write_file_atomic(dir + "/capture.json", j.dump(2) + "\n");
  if (!a.quiet) {
    const auto traces = read_capture_dir(dir);
    std::uint64_t events = 0, dropped = 0;
    for (const auto& t : traces) {
      events += t.io.size() + t.conns.size() + t.tcp_info.size();
      dropped += t.events_dropped;
    }
    fmt::print(stderr, "tensorwire capture: the job {}; {} process(es) traced, {} events, {} dropped; traces in {}\n",
               ChildProcess::describe(status), traces.size(), events, dropped, dir);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

struct ShowArgs {
  std::string dir;
  bool json = false;
  double gap_us = 100;
};

Nanos pct(std::vector<Nanos> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

int show_command(const ShowArgs& a) {
  const auto traces = read_capture_dir(a.dir);
  if (traces.empty()) throw std::runtime_error(a.dir + ": no traces (trace-PID.json) in it");
  const CaptureAnalysis an = analyse_capture(traces, static_cast<Nanos>(a.gap_us * 1e3));
  std::vector<std::uint64_t> msgs(an.connections.size(), 0);
  std::vector<std::vector<Nanos>> in_send(an.connections.size()), to_peer(an.connections.size());
  for (const Message& m : an.messages) {
    ++msgs[m.connection];
    in_send[m.connection].push_back(m.sent_app - m.ready);
    if (m.recv_last >= 0) to_peer[m.connection].push_back(m.recv_last - m.sent_app);
  }
  if (a.json) {
    nlohmann::json j;
    nlohmann::json procs = nlohmann::json::array();
    for (const auto& t : traces) {
      procs.push_back({{"pid", t.pid}, {"ppid", t.ppid}, {"host", t.host}, {"rank", t.rank_text()}, {"cmdline", t.cmdline},
                       {"final", t.final}, {"events_dropped", t.events_dropped}, {"untracked", t.untracked}, {"wire", t.wire}});
    }
    j["processes"] = std::move(procs);
    nlohmann::json conns = nlohmann::json::array();
    for (std::size_t i = 0; i < an.connections.size(); ++i) {
      const Connection& c = an.connections[i];
      nlohmann::json x = {{"pid", traces[c.process].pid},   {"rank", traces[c.process].rank_text()},
                          {"local", c.local.address},        {"remote", c.remote.address},
                          {"how", c.how},                    {"role", c.role},
                          {"bytes_sent", c.bytes_sent},
                          {"bytes_received", c.bytes_received}, {"send_calls", c.send_calls},
                          {"recv_calls", c.recv_calls},      {"failed_calls", c.failed_calls},
                          {"messages", msgs[i]}};
      if (c.peer) x["peer_pid"] = traces[an.connections[*c.peer].process].pid;
      conns.push_back(std::move(x));
    }
    j["connections"] = std::move(conns);
    nlohmann::json ms = nlohmann::json::array();
    for (const Message& m : an.messages) {
      ms.push_back({{"connection", m.connection}, {"begin", m.begin}, {"end", m.end}, {"calls", m.calls}, {"ready_ns", m.ready},
                    {"sent_app_ns", m.sent_app}, {"recv_first_ns", m.recv_first}, {"recv_last_ns", m.recv_last}});
    }
    j["messages"] = std::move(ms);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  TextTable p({"pid", "rank", "command", "events", "dropped", "complete"});
  for (const auto& t : traces) {
    std::string cmd;
    for (const auto& w : t.cmdline) cmd += (cmd.empty() ? "" : " ") + w;
    if (cmd.size() > 48) cmd = cmd.substr(0, 45) + "...";
    p.add({std::to_string(t.pid), t.rank_text().empty() ? "-" : t.rank_text(), cmd,
           std::to_string(t.io.size() + t.conns.size() + t.tcp_info.size()), std::to_string(t.events_dropped),
           t.final ? "yes" : "no (killed?)"});
  }
  fmt::print("{}\n", p.str());
  TextTable c({"pid", "rank", "role", "local", "remote", "sent", "received", "messages", "in send p50/p99", "to peer p50/p99"});
  for (std::size_t i = 0; i < an.connections.size(); ++i) {
    const Connection& x = an.connections[i];
    if (x.bytes_sent + x.bytes_received == 0) continue;
    const auto dur = [](Nanos v) { return v < 0 ? std::string("-") : human_duration(v); };
    c.add({std::to_string(traces[x.process].pid), traces[x.process].rank_text().empty() ? "-" : traces[x.process].rank_text(), x.role,
           x.local.address, x.remote.address, human_bytes(x.bytes_sent), human_bytes(x.bytes_received), std::to_string(msgs[i]),
           dur(pct(in_send[i], 0.5)) + " / " + dur(pct(in_send[i], 0.99)), dur(pct(to_peer[i], 0.5)) + " / " + dur(pct(to_peer[i], 0.99))});
  }
  fmt::print("{}", c.str());
  fmt::print("\nmessages: send calls less than {} apart on one connection; \"in send\": from the first call to the last\n"
             "call's return; \"to peer\": from that return to the peer reading the last byte. No wire tap in this\n"
             "capture: queueing, wire and acknowledgement times are not separated.\n",
             human_duration(static_cast<Nanos>(a.gap_us * 1e3)));
  return 0;
}

}  // namespace

void add_capture_commands(CLI::App& app, Action& action) {
  auto a = std::make_shared<CaptureArgs>();
  CLI::App* c = app.add_subcommand("capture", "Run a job with every TCP socket call traced (LD_PRELOAD), unchanged");
  c->footer(
      "  tensorwire capture --out DIR -- python3 train.py ...\n"
      "Child processes are traced too (the preload is inherited). One trace per process in DIR\n"
      "(docs/trace-format.md); the exit status is the job's. Ctrl-C goes to the job, which flushes on exit.");
  c->add_option("--out", a->out, "Directory for the traces")->required();
  c->add_option("--wire", a->wire, "Wire tap: auto or off (not in this version: application events and TCP_INFO only)")
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
}

}  // namespace tw::cli

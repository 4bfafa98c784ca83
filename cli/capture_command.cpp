// `tensorwire capture -- CMD` and `tensorwire trace show DIR`.
#include <fmt/core.h>
#include <fmt/format.h>
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
  write_file_atomic(dir + "/capture.json", j.dump(2) + "\n");
  if (!a.quiet) {
    const auto traces = read_capture_dir(dir);
    std::uint64_t events = 0, dropped = 0;
    for (const auto& t : traces) {
      events += t.io.size() + t.conns.size() + t.tcp_info.size();
      dropped += t.events_dropped;
    }
    std::string tap_text = "no wire tap";
    if (wire.contains("packets")) {
      tap_text = fmt::format("wire tap: {} packets, {} lost", wire["packets"].get<std::uint64_t>(), wire["dropped"].get<std::uint64_t>());
    }
    fmt::print(stderr, "tensorwire capture: the job {}; {} process(es) traced, {} events, {} dropped; {}; traces in {}\n",
               ChildProcess::describe(status), traces.size(), events, dropped, tap_text, dir);
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
  return {{"count", v.size()}, {"p50_ns", pct(v, 0.5)}, {"p90_ns", pct(v, 0.9)}, {"p99_ns", pct(v, 0.99)}, {"max_ns", pct(v, 1.0)}};
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
                    {"retransmits", m.retransmits}, {"recv_first_ns", m.recv_first}, {"recv_last_ns", m.recv_last}});
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
  const auto dur = [](const std::vector<Nanos>& v) {
    return v.empty() ? std::string("-") : human_duration(pct(v, 0.5)) + " / " + human_duration(pct(v, 0.99));
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
  if (!wire.present()) {
    fmt::print("wire tap: {}; queued, wire and ack times are not known.\n", wire.status.empty() ? "none" : wire.status);
  } else {
    fmt::print("wire tap on {}: {} frames, {} lost in the kernel{}{}\n", fmt::join(wire.interfaces, ","), wire.frames, wire.dropped,
               wire.truncated ? "; a file was cut short" : "", wire.status.empty() ? "" : "; " + wire.status);
  }
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
}

}  // namespace tw::cli

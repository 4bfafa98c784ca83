#include "tensorwire/capture/trace_report.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/text_table.hpp"

namespace tw {
namespace {

// Per connection: the distributions trace show prints, from its messages.
struct ConnTimes {
  std::uint64_t messages = 0;
  std::uint32_t retransmits = 0;
  std::vector<Nanos> in_send, queued, on_wire, ack_wait, to_peer;
  std::uint64_t to_peer_clamped = 0;  // below zero: the two ends' clocks disagree (two hosts)
};

// Per connection, its send calls that moved bytes, by stream offset.
std::vector<std::vector<const trace::Event*>> sends_by_connection(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& an) {
  std::map<std::pair<std::size_t, std::uint32_t>, std::size_t> index;
  for (std::size_t i = 0; i < an.connections.size(); ++i) index[{an.connections[i].process, an.connections[i].id}] = i;
  std::vector<std::vector<const trace::Event*>> out(an.connections.size());
  for (std::size_t p = 0; p < traces.size(); ++p) {
    for (const trace::Event& e : traces[p].io) {
      if (e.kind != trace::Kind::send || e.result <= 0 || (e.flags & trace::kFlagError)) continue;
      if (const auto it = index.find({p, e.conn}); it != index.end()) out[it->second].push_back(&e);
    }
  }
  for (auto& v : out) std::sort(v.begin(), v.end(), [](const trace::Event* a, const trace::Event* b) { return a->offset < b->offset; });
  return out;
}

// When the message's last byte is known to have left: its first sighting on the
// wire, or else the entry of the send call that moved it (the byte cannot reach
// the peer before either; a send call's return can come after the peer's read).
Nanos last_byte_left(const Message& m, const std::vector<const trace::Event*>& sends) {
  if (m.wire_last >= 0) return m.wire_last;
  const std::uint64_t last = m.end - 1;
  auto it = std::upper_bound(sends.begin(), sends.end(), last, [](std::uint64_t o, const trace::Event* e) { return o < e->offset; });
  if (it != sends.begin() && last < (*std::prev(it))->offset + static_cast<std::uint64_t>((*std::prev(it))->result)) {
    return (*std::prev(it))->enter_ns;
  }
  return m.ready;
}

std::vector<ConnTimes> connection_times(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& an) {
  std::vector<ConnTimes> out(an.connections.size());
  const auto sends = sends_by_connection(traces, an);
  for (const Message& m : an.messages) {
    ConnTimes& c = out[m.connection];
    ++c.messages;
    c.retransmits += m.retransmits;
    c.in_send.push_back(m.sent_app - m.ready);
    if (m.recv_last >= 0 && m.end > m.begin) {
      const Nanos d = m.recv_last - last_byte_left(m, sends[m.connection]);
      c.to_peer.push_back(std::max<Nanos>(d, 0));
      if (d < 0) ++c.to_peer_clamped;
    }
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
void print_annotations(std::string& out, const std::vector<ProcessTrace>& traces, const CaptureAnalysis& an) {
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
  for (const auto& [p, spans] : compute) {
    const auto get = [&by = spans](trace::MarkType k) {  // clang 14 cannot capture a structured binding
      const auto it = by.find(k);
      return it == by.end() ? std::vector<Nanos>{} : it->second;
    };
    t.add({std::to_string(traces[p].pid), traces[p].rank_text().empty() ? "-" : traces[p].rank_text(),
           std::to_string(get(trace::MarkType::iteration).size()), dur(get(trace::MarkType::iteration)),
           dur(get(trace::MarkType::forward)), dur(get(trace::MarkType::backward)), dur(get(trace::MarkType::optimizer))});
  }
  out += fmt::format("\nannotated compute, p50:\n{}", t.str());
  if (buckets.empty()) return;
  TextTable b({"pid", "bucket", "first tensor", "bytes", "iterations", "ready to reduced p50", "sent per iteration"});
  for (const auto& [key, x] : buckets) {
    const std::size_t n = std::max<std::size_t>(1, x.iterations.size());
    b.add({std::to_string(traces[std::get<0>(key)].pid), std::to_string(std::get<1>(key)), x.name, human_bytes(static_cast<std::uint64_t>(x.bytes)),
           std::to_string(x.reduce.size()), dur(x.reduce), human_bytes(x.sent / n)});
  }
  out += fmt::format("\nDDP gradient buckets (a message belongs to the earliest-ready bucket not yet reduced):\n{}", b.str());
}

// Imported profiler ops: where each process spent its compute, top ops first.
void print_ops(std::string& out, const std::vector<ImportedOp>& ops) {
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
  out += fmt::format("\nimported ops (trace import), top 8 per process by total time (nested ops count in their parents too):\n{}", t.str());
}

}  // namespace

CaptureReading read_capture(const std::string& dir, Nanos gap) {
  CaptureReading c;
  c.traces = read_capture_dir(dir);
  if (c.traces.empty()) throw std::runtime_error(dir + ": no traces (trace-PID.json) in it");
  c.wire = read_wire_capture(dir);
  c.analysis = analyse_capture(c.traces, gap, c.wire.present() ? &c.wire.index : nullptr);
  c.gap = gap;
  return c;
}

void write_trace_report_json(const CaptureReading& reading, const std::function<void(std::string_view)>& out) {
  const std::vector<ProcessTrace>& traces = reading.traces;
  const WireCapture& wire = reading.wire;
  const CaptureAnalysis& an = reading.analysis;
  const std::vector<ConnTimes> times = connection_times(traces, an);
  // Written as it goes: connections, messages and spans can each be millions.
  // Members in alphabetical order, as nlohmann::json kept them when the report
  // was one document.
  JsonObjectWriter j(out, 2);
  j.begin_array("connections");
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
                        {"ack_wait", distribution(t.ack_wait)}, {"to_peer", distribution(t.to_peer)},
                        {"to_peer_clamped", t.to_peer_clamped}};
    if (c.peer) x["peer_pid"] = traces[an.connections[*c.peer].process].pid;
    j.element(x);
  }
  j.end_array();
  j.begin_array("messages");
  for (const Message& m : an.messages) {
    j.element({{"connection", m.connection}, {"begin", m.begin},          {"end", m.end},
               {"calls", m.calls},           {"ready_ns", m.ready},       {"sent_app_ns", m.sent_app},
               {"wire_first_ns", m.wire_first}, {"wire_last_ns", m.wire_last}, {"acked_ns", m.acked},
               {"retransmits", m.retransmits}, {"recv_first_ns", m.recv_first}, {"recv_last_ns", m.recv_last},
               {"iteration", m.iteration}, {"bucket_span", m.bucket_span}});
  }
  j.end_array();
  j.begin_array("processes");
  for (const auto& t : traces) {
    j.element({{"pid", t.pid}, {"ppid", t.ppid}, {"host", t.host}, {"rank", t.rank_text()}, {"cmdline", t.cmdline},
               {"final", t.final}, {"events_missing", t.events_missing}, {"events_dropped", t.events_dropped}, {"untracked", t.untracked},
               {"samples", t.samples.size()}});
  }
  j.end_array();
  j.begin_array("spans");
  for (const AnnotatedSpan& x : an.spans) {
    j.element({{"pid", traces[x.process].pid}, {"type", mark_type_name(x.type)}, {"name", x.name}, {"value", x.value},
               {"index", x.aux}, {"begin_ns", x.begin}, {"end_ns", x.end}});
  }
  j.end_array();
  j.member("wire", {{"mode", wire.mode},     {"status", wire.status}, {"interfaces", wire.interfaces},
                    {"frames", wire.frames}, {"dropped", wire.dropped}, {"truncated", wire.truncated}});
  j.finish();
}

std::string trace_report_text(const CaptureReading& reading, const std::vector<ImportedOp>& ops) {
  const std::vector<ProcessTrace>& traces = reading.traces;
  const WireCapture& wire = reading.wire;
  const CaptureAnalysis& an = reading.analysis;
  const std::vector<ConnTimes> times = connection_times(traces, an);
  std::string out;
  TextTable p({"pid", "rank", "command", "events", "dropped", "complete"});
  for (const auto& t : traces) {
    std::string cmd;
    for (const auto& w : t.cmdline) cmd += (cmd.empty() ? "" : " ") + w;
    if (cmd.size() > 48) cmd = cmd.substr(0, 45) + "...";
    p.add({std::to_string(t.pid), t.rank_text().empty() ? "-" : t.rank_text(), cmd,
           std::to_string(t.event_count()), std::to_string(t.events_dropped),
           t.events_missing ? fmt::format("no ({} events missing: the file is cut short)", t.events_missing)
           : t.final        ? "yes"
                            : "no (killed?)"});
  }
  out += fmt::format("{}\n", p.str());
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
    c.add({pid, traces[x.process].rank_text().empty() ? "-" : traces[x.process].rank_text(), role_name(x.role), x.local.address,
           x.remote.address, human_bytes(x.bytes_sent), human_bytes(x.bytes_received), std::to_string(times[i].messages),
           fmt::format("{} / {}", x.on_wire ? std::to_string(x.retransmits) : "-", x.kernel_retransmits), seen});
    if (times[i].messages == 0) continue;
    d.add({pid, x.local.address, x.remote.address, dur(times[i].in_send), dur(times[i].queued), dur(times[i].on_wire),
           dur(times[i].ack_wait), dur(times[i].to_peer)});
  }
  out += fmt::format("{}\n", c.str());
  out += fmt::format("message timing, p50 / p99 per connection that sent:\n{}", d.str());
  out += fmt::format("\nmessages: send calls less than {} apart on one connection. in send: first call entered to last\n"
             "call returned; queued: first call entered to its first byte on the wire; wire: first to last byte\n"
             "on the wire; ack: last byte on the wire to the ACK covering it; to peer: last byte on the wire\n"
             "(without the wire tap: the send call that moved it entered) to the peer's read call returning it,\n"
             "never below 0 (on two hosts' clocks, below 0 is clock error and counts as 0). retrans: frames that\n"
             "carried bytes again on the wire / the kernel's count of retransmitted segments (TCP_INFO, last\n"
             "snapshot; it includes copies dropped before the wire).\n",
             human_duration(reading.gap));
  if (!an.spans.empty()) print_annotations(out, traces, an);
  if (!ops.empty()) print_ops(out, ops);
  if (!wire.present()) {
    out += fmt::format("wire tap: {}; queued, wire and ack times are not known.\n", wire.status.empty() ? "none" : wire.status);
  } else {
    out += fmt::format("wire tap on {}: {} frames, {} lost in the kernel{}{}\n", fmt::join(wire.interfaces, ","), wire.frames, wire.dropped,
               wire.truncated ? "; a file was cut short" : "", wire.status.empty() ? "" : "; " + wire.status);
  }
  return out;
}

}  // namespace tw

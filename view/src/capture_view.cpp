// The view of a capture: a process per traced process (its rank when it has
// one), and in each its iterations, annotated spans, imported profiler ops, and
// per connection the messages it sent (with their stages, from the wire tap)
// and read, each send joined to its read by a flow, with counters of the
// connection's throughput and of the kernel's TCP_INFO.
#include <algorithm>
#include <map>
#include <set>

#include "draw.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/view/sources.hpp"

namespace tw::view {
namespace {

bool wanted_rank(const Selection& s, std::optional<RankId> r) {
  return s.ranks.empty() || (r && std::find(s.ranks.begin(), s.ranks.end(), *r) != s.ranks.end());
}

bool wanted_flow(const Selection& s, std::optional<RankId> a, std::optional<RankId> b) {
  if (s.flows.empty()) return true;
  return a && b && std::find(s.flows.begin(), s.flows.end(), std::make_pair(*a, *b)) != s.flows.end();
}

std::string process_name(const ProcessTrace& t, std::optional<RankId> rank) {
  std::string n = rank ? "rank " + std::to_string(*rank) : "pid " + std::to_string(t.pid);
  n += " (" + (t.host.empty() ? std::string("?") : t.host) + (rank ? ", pid " + std::to_string(t.pid) : "") + ")";
  return n;
}

}  // namespace

View view_of_capture(const CaptureJob& job, const std::vector<ImportedOp>& ops, const Selection& sel, ViewCounts* counts) {
  const auto& traces = job.traces;
  const CaptureAnalysis& an = job.analysis;
  View v;
  ViewCounts n;
  // The messages shown: of the chosen iterations, ranks and flows.
  std::vector<char> keep(an.messages.size(), 1);
  if (sel.iterations) {
    if (job.iteration_source.empty()) {
      std::string why = job.notes.empty() ? "none found" : job.notes.back();
      throw std::runtime_error("--iterations: this capture's iterations are not known (" + why + ")");
    }
    for (std::size_t m = 0; m < keep.size(); ++m) {
      const std::int64_t it = job.iteration_of_message[m];
      keep[m] = it >= sel.iterations->first && it < sel.iterations->second;
    }
  }
  const auto rank_of = [&](std::size_t process) { return job.rank_of_process[process]; };
  for (RankId r : sel.ranks) {
    if (std::find(job.rank_of_process.begin(), job.rank_of_process.end(), std::optional<RankId>(r)) == job.rank_of_process.end()) {
      throw std::invalid_argument("--ranks: no process of this capture is rank " + std::to_string(r));
    }
  }
  Nanos lo = std::numeric_limits<Nanos>::max(), hi = std::numeric_limits<Nanos>::min();
  for (std::size_t m = 0; m < keep.size(); ++m) {
    const Message& x = an.messages[m];
    const Connection& c = an.connections[x.connection];
    const std::optional<RankId> dst = c.peer ? rank_of(an.connections[*c.peer].process) : std::nullopt;
    keep[m] = keep[m] && wanted_rank(sel, rank_of(c.process)) && wanted_flow(sel, rank_of(c.process), dst);
    if (!keep[m]) continue;
    lo = std::min(lo, x.ready);
    hi = std::max({hi, x.sent_app, x.recv_last, x.acked});
  }
  if (lo > hi) {
    lo = 0, hi = 0;
    for (const ProcessTrace& t : traces) {
      for (const auto& e : t.io) lo = lo ? std::min(lo, e.enter_ns) : e.enter_ns, hi = std::max(hi, e.exit_ns);
    }
  }
  // With a selection, spans and counters are kept where they overlap the messages shown.
  const bool windowed = sel.iterations.has_value();
  const auto in_window = [&](Nanos b, Nanos e) { return !windowed || (e >= lo && b <= hi); };
  const Nanos bin = draw::bin_for(hi - lo, sel.counter_points);

  std::vector<std::uint64_t> proc(traces.size(), 0);
  for (std::size_t p = 0; p < traces.size(); ++p) {
    if (!wanted_rank(sel, rank_of(p))) continue;
    proc[p] = v.add_process(traces[p].pid, process_name(traces[p], rank_of(p)));
  }
  const StrId cat_iteration = v.intern("iteration"), cat_annotation = v.intern("annotation"), cat_op = v.intern("op"),
              cat_message = v.intern("message"), cat_read = v.intern("read");

  // Iterations: annotated, else the builder's (from each process's messages).
  // Per process: (begin, end, number), by begin. Annotated numbers may repeat (a
  // job that counts per epoch): each span is drawn.
  struct Span {
    Nanos begin, end;
    std::int64_t number;
  };
  std::vector<std::vector<Span>> iter(traces.size());
  for (const AnnotatedSpan& s : an.spans) {
    if (s.type == trace::MarkType::iteration && s.end >= s.begin) iter[s.process].push_back({s.begin, s.end, s.value});
  }
  if (job.iteration_source == "periodic traffic") {
    std::vector<std::map<std::int64_t, std::pair<Nanos, Nanos>>> found(traces.size());
    for (std::size_t m = 0; m < an.messages.size(); ++m) {
      const std::int64_t it = job.iteration_of_message[m];
      if (it < 0) continue;
      const Message& x = an.messages[m];
      const std::size_t p = an.connections[x.connection].process;
      auto [e, fresh] = found[p].try_emplace(it, x.ready, std::max(x.sent_app, x.ready));
      if (!fresh) e->second.first = std::min(e->second.first, x.ready), e->second.second = std::max(e->second.second, x.sent_app);
    }
    for (std::size_t p = 0; p < traces.size(); ++p) {
      for (const auto& [num, be] : found[p]) iter[p].push_back({be.first, be.second, num});
    }
  }
  std::set<std::int64_t> shown;
  for (std::size_t p = 0; p < traces.size(); ++p) {
    if (!proc[p] || iter[p].empty()) continue;
    std::stable_sort(iter[p].begin(), iter[p].end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    const std::uint32_t t = v.add_track(proc[p], "iterations", TrackKind::slices);
    Nanos last = std::numeric_limits<Nanos>::min();
    for (const Span& it : iter[p]) {
      if (sel.iterations && (it.number < sel.iterations->first || it.number >= sel.iterations->second)) continue;
      // Detected iterations of one process may overlap a little: drawn one after the other.
      const Nanos b = std::max(it.begin, last), e = std::max(it.end, b);
      const SliceRef r = v.add_slice(t, b, e, v.intern("iteration " + std::to_string(it.number)), 0, cat_iteration);
      v.add_arg(r, "iteration", it.number);
      last = e;
      shown.insert(it.number);
    }
  }
  n.iterations = shown.size();
  // Annotated spans (forward, backward, optimizer, named spans; DDP buckets apart).
  std::vector<const AnnotatedSpan*> spans;
  for (const AnnotatedSpan& s : an.spans) {
    if (s.type != trace::MarkType::iteration && proc[s.process] && s.end >= s.begin && in_window(s.begin, s.end)) spans.push_back(&s);
  }
  draw::by_time(spans, [](const AnnotatedSpan* s) { return s->begin; });
  std::map<std::pair<std::size_t, bool>, Lanes> span_lanes;
  for (const AnnotatedSpan* s : spans) {
    const bool bucket = s->type == trace::MarkType::bucket;
    auto it = span_lanes.find({s->process, bucket});
    if (it == span_lanes.end()) {
      const std::string name = bucket ? "DDP buckets" : "annotations";
      const std::uint32_t g = v.add_track(proc[s->process], name, TrackKind::group);
      it = span_lanes.emplace(std::make_pair(s->process, bucket), Lanes(v, v.tracks[g].uuid, name)).first;
    }
    const std::string name = bucket ? "bucket " + std::to_string(s->aux) : s->type == trace::MarkType::span ? s->name : mark_type_name(s->type);
    const SliceRef r = v.add_slice(it->second.place(s->begin, s->end), s->begin, s->end, v.intern(name), 0, cat_annotation);
    if (bucket) v.add_arg(r, "bytes", s->value);
  }
  // Imported profiler ops, a group per thread.
  std::map<int, std::size_t> by_pid;
  for (std::size_t p = 0; p < traces.size(); ++p) by_pid[traces[p].pid] = p;
  std::vector<const ImportedOp*> imported;
  for (const ImportedOp& op : ops) {
    const auto p = by_pid.find(op.pid);
    if (p != by_pid.end() && proc[p->second] && op.end >= op.begin && in_window(op.begin, op.end)) imported.push_back(&op);
  }
  draw::by_time(imported, [](const ImportedOp* o) { return o->begin; });
  std::map<std::pair<int, std::string>, Lanes> op_lanes;
  for (const ImportedOp* op : imported) {
    auto it = op_lanes.find({op->pid, op->thread});
    if (it == op_lanes.end()) {
      const std::string name = "ops " + op->thread;
      const std::uint32_t g = v.add_track(proc[by_pid[op->pid]], name, TrackKind::group);
      it = op_lanes.emplace(std::make_pair(op->pid, op->thread), Lanes(v, v.tracks[g].uuid, name)).first;
    }
    v.add_slice(it->second.place(op->begin, op->end), op->begin, op->end, v.intern(op->name), 0,
                op->category.empty() ? cat_op : v.intern(op->category));
  }

  // Connections: the sender's group "to X" and the receiver's "from Y".
  const auto peer_name = [&](const Connection& c, bool to) {
    std::string who = c.remote.address;
    if (c.peer) {
      const std::size_t q = an.connections[*c.peer].process;
      who = rank_of(q) ? "rank " + std::to_string(*rank_of(q)) : "pid " + std::to_string(traces[q].pid);
    }
    return std::string(to ? "to " : "from ") + who + (c.role == ConnectionRole::store ? " (store)" : "") + " · " + c.local.address;
  };
  std::vector<std::vector<std::size_t>> of_conn(an.connections.size());
  for (std::size_t m = 0; m < an.messages.size(); ++m) {
    if (keep[m]) of_conn[an.messages[m].connection].push_back(m);
  }
  std::vector<std::optional<Lanes>> send_lanes(an.connections.size()), read_lanes(an.connections.size());
  // TCP_INFO snapshots by process and connection id, found once.
  std::vector<std::map<std::uint32_t, std::vector<const trace::TcpInfoEvent*>>> tcp(traces.size());
  for (std::size_t p = 0; p < traces.size(); ++p) {
    for (const auto& e : traces[p].tcp_info) tcp[p][e.conn].push_back(&e);
  }
  struct Read {
    std::size_t message;
    SliceRef sent;
  };
  std::vector<std::vector<Read>> reads(an.connections.size());  // by receiving connection
  for (std::size_t ci = 0; ci < an.connections.size(); ++ci) {
    const Connection& c = an.connections[ci];
    if (of_conn[ci].empty() || !proc[c.process]) continue;
    std::vector<std::size_t>& ms = of_conn[ci];
    draw::by_time(ms, [&](std::size_t m) { return an.messages[m].ready; });
    const std::string name = peer_name(c, true);
    const std::uint32_t g = v.add_track(proc[c.process], name, TrackKind::group);
    Lanes& lanes = send_lanes[ci].emplace(v, v.tracks[g].uuid, name);
    std::vector<draw::Transfer> moved;
    for (std::size_t m : ms) {
      const Message& x = an.messages[m];
      const Bytes bytes = x.end - x.begin;
      const draw::MessageTimes t{x.ready, x.sent_app, x.wire_first, x.wire_last, x.acked};
      const SliceRef r = draw::message(v, lanes, t, v.intern(human_bytes(bytes)), cat_message);
      v.add_arg(r, "bytes", static_cast<std::int64_t>(bytes));
      v.add_arg(r, "stream offset", static_cast<std::int64_t>(x.begin));
      if (job.iteration_of_message[m] >= 0) v.add_arg(r, "iteration", job.iteration_of_message[m]);
      if (x.bucket_span >= 0) v.add_arg(r, "bucket", an.spans[static_cast<std::size_t>(x.bucket_span)].aux);
      if (x.retransmits) v.add_arg(r, "retransmits", x.retransmits);
      if (x.control) v.add_arg(r, "control", "yes");
      ++n.messages;
      if (c.peer && x.recv_first >= 0 && x.recv_last >= x.recv_first) reads[*c.peer].push_back({m, r});
      const bool wire = x.wire_first >= 0 && x.wire_last >= x.wire_first;
      moved.push_back({wire ? x.wire_first : x.ready, wire ? x.wire_last : x.sent_app, bytes});
    }
    draw::counter(v, proc[c.process], "throughput " + name + " (bit/s)", "bit/s", downsample(draw::throughput(std::move(moved), bin), bin, true));
    // TCP_INFO at the sender's calls.
    std::vector<std::pair<Nanos, double>> cwnd, unacked, notsent;
    const auto snapshots = tcp[c.process].find(c.id);
    for (const trace::TcpInfoEvent* e : snapshots == tcp[c.process].end() ? std::vector<const trace::TcpInfoEvent*>{} : snapshots->second) {
      if (!in_window(e->at_ns, e->at_ns)) continue;
      cwnd.emplace_back(e->at_ns, e->snd_cwnd);
      unacked.emplace_back(e->at_ns, e->unacked);
      notsent.emplace_back(e->at_ns, e->notsent_bytes);
    }
    draw::counter(v, proc[c.process], "cwnd " + name + " (segments)", "segments", downsample(std::move(cwnd), bin, true));
    draw::counter(v, proc[c.process], "unacknowledged " + name + " (segments)", "segments", downsample(std::move(unacked), bin, true));
    draw::counter(v, proc[c.process], "not yet sent " + name + " (bytes)", "bytes", downsample(std::move(notsent), bin, true));
  }
  for (std::size_t ci = 0; ci < an.connections.size(); ++ci) {
    std::vector<Read>& rs = reads[ci];
    const Connection& c = an.connections[ci];
    if (rs.empty() || !proc[c.process]) continue;
    draw::by_time(rs, [&](const Read& r) { return an.messages[r.message].recv_first; });
    const std::string name = peer_name(c, false);
    const std::uint32_t g = v.add_track(proc[c.process], name, TrackKind::group);
    Lanes& lanes = read_lanes[ci].emplace(v, v.tracks[g].uuid, name);
    for (const Read& r : rs) {
      const Message& x = an.messages[r.message];
      const SliceRef s = v.add_slice(lanes.place(x.recv_first, x.recv_last), x.recv_first, x.recv_last, v.intern("read"), 0, cat_read);
      v.add_arg(s, "bytes", static_cast<std::int64_t>(x.end - x.begin));
      v.link(r.sent, s);
      ++n.receipts;
    }
  }

  // About the trace: where it came from and on which clock.
  nlohmann::json clocks = nlohmann::json::array();
  for (const auto& c : job.clocks) clocks.push_back({{"host", c.host}, {"offset_ns", c.offset}, {"bound_ns", c.uncertainty}});
  v.metadata = {{"source", "capture"},
                {"clock", "CLOCK_REALTIME of rank 0's host; other hosts' clocks moved onto it by the offsets the traffic bounds"},
                {"hosts", clocks},
                {"wire_tap", job.wire},
                {"iterations_from", job.iteration_source},
                {"messages", n.messages},
                {"receipts", n.receipts},
                {"notes", job.notes}};
  if (counts) *counts = n;
  return v;
}

}  // namespace tw::view

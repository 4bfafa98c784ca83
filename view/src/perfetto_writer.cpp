// Perfetto's protobuf trace, written with an encoder of our own: the field
// numbers are those of Perfetto's published protos (protos/perfetto/trace/
// trace_packet.proto, track_event/*.proto, clock_snapshot.proto,
// interned_data/interned_data.proto); docs/view.md lists the ones used.
//
// Each track's events are one packet sequence: its track is the sequence's
// default (TrackEventDefaults), its names are interned on it, and its times are
// deltas on a clock of its own (an incremental clock, id 64) that a clock
// snapshot ties to CLOCK_REALTIME, the trace's clock.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "proto_encoder.hpp"
#include "tensorwire/view/view.hpp"

namespace tw::view {
namespace {

// Field numbers.
namespace trace_packet {
constexpr int kTimestamp = 8, kTrackEvent = 11, kTrackDescriptor = 60, kSequenceId = 10, kInternedData = 12,
              kSequenceFlags = 13, kDefaults = 59, kClockSnapshot = 6, kCompressed = 50;
}
namespace track_event {
constexpr int kType = 9, kNameIid = 10, kCategoryIids = 3, kDebugAnnotations = 4, kDoubleCounterValue = 44,
              kFlowIds = 47, kTerminatingFlowIds = 48;
constexpr int kSliceBegin = 1, kSliceEnd = 2, kCounter = 4;
}  // namespace track_event
namespace track_descriptor {
constexpr int kUuid = 1, kParentUuid = 5, kName = 2, kProcess = 3, kCounter = 8;
}
constexpr int kProcessPid = 1, kProcessName = 6;
constexpr int kCounterUnit = 3, kUnitSizeBytes = 3;
constexpr int kAnnotationNameIid = 1, kAnnotationInt = 4, kAnnotationString = 6;
constexpr int kInternedCategories = 1, kInternedEventNames = 2, kInternedAnnotationNames = 3, kInternedIid = 1, kInternedName = 2;
constexpr int kDefaultsClockId = 58, kDefaultsTrackEvent = 11, kTrackEventDefaultsTrackUuid = 11;
constexpr int kClockSnapshotClocks = 1, kClockSnapshotPrimary = 2, kClockId = 1, kClockTimestamp = 2, kClockIncremental = 3;
constexpr std::uint64_t kRealtime = 1, kSequenceClock = 64;
constexpr std::uint64_t kIncrementalStateCleared = 1;



// Top-level packets, deflated in chunks or written as they are.
class Sink {
 public:
  Sink(std::ostream& out, bool compress) : out_(out), compress_(compress) {}
  void packet(const Proto& p) {
    Proto framed;
    framed.msg(1, p);  // Trace.packet
    if (!compress_) {
      write(framed.bytes());
      return;
    }
    if (!chunk_.empty() && chunk_.size() + framed.size() > kChunk) flush();
    chunk_ += framed.bytes();
  }
  void flush() {
    if (chunk_.empty()) return;
    uLongf n = compressBound(static_cast<uLong>(chunk_.size()));
    z_.resize(n);
    if (compress2(reinterpret_cast<Bytef*>(z_.data()), &n, reinterpret_cast<const Bytef*>(chunk_.data()),
                  static_cast<uLong>(chunk_.size()), 1) != Z_OK) {
      throw std::runtime_error("deflate failed");
    }
    if (n < kChunk) {
      Proto p, framed;
      p.str(trace_packet::kCompressed, std::string_view(z_.data(), n));
      framed.msg(1, p);
      write(framed.bytes());
    } else {
      write(chunk_);  // did not shrink below Perfetto's limit: as they are
    }
    chunk_.clear();
  }
  std::uint64_t written() const { return written_; }

 private:
  // Perfetto reads compressed packets of less than 512 KB.
  static constexpr std::size_t kChunk = 500 * 1024;
  void write(const std::string& s) {
    out_.write(s.data(), static_cast<std::streamsize>(s.size()));
    written_ += s.size();
  }
  std::ostream& out_;
  bool compress_;
  std::string chunk_, z_;
  std::uint64_t written_ = 0;
};

// Flow ids per slice: (track, slice) -> ids starting / ending there.
struct FlowEnds {
  std::uint32_t track, slice;
  std::uint64_t id;
  bool terminating;
};

class SequenceWriter {
 public:
  SequenceWriter(const View& v, Sink& sink, std::uint32_t seq, const Track& t, Nanos t0) : v_(v), sink_(sink), seq_(seq), last_(t0) {
    Proto clock, clocks, p;
    clock.u(kClockId, kSequenceClock), clock.u(kClockTimestamp, static_cast<std::uint64_t>(t0)), clock.u(kClockIncremental, 1);
    clocks.msg(kClockSnapshotClocks, clock);
    clock.clear();
    clock.u(kClockId, kRealtime), clock.u(kClockTimestamp, static_cast<std::uint64_t>(t0));
    clocks.msg(kClockSnapshotClocks, clock);
    p.u(trace_packet::kSequenceId, seq_);
    p.msg(trace_packet::kClockSnapshot, clocks);
    sink_.packet(p);
    uuid_ = t.uuid;
  }

  void begin_packet(Nanos ts) {
    pk_.clear();
    ev_.clear();
    interned_.clear();
    if (ts < last_) throw std::logic_error("view: events out of time order on a track");
    pk_.u(trace_packet::kTimestamp, static_cast<std::uint64_t>(ts - last_));
    last_ = ts;
    pk_.u(trace_packet::kSequenceId, seq_);
    if (first_) {
      Proto defaults, te;
      te.u(kTrackEventDefaultsTrackUuid, uuid_);
      defaults.u(kDefaultsClockId, kSequenceClock);
      defaults.msg(kDefaultsTrackEvent, te);
      pk_.msg(trace_packet::kDefaults, defaults);
      pk_.u(trace_packet::kSequenceFlags, kIncrementalStateCleared);
      first_ = false;
    }
  }
  Proto& event() { return ev_; }
  // The iid of a name on this sequence, emitted in this packet the first time.
  std::uint64_t name(int index, StrId id) {
    auto& seen = seen_[index];
    if (id >= seen.size()) seen.resize(id + 1, false);
    if (!seen[id]) {
      seen[id] = true;
      Proto e;
      e.u(kInternedIid, id), e.str(kInternedName, v_.strings[id]);
      interned_.msg(index, e);
    }
    return id;
  }
  void end_packet() {
    pk_.msg(trace_packet::kTrackEvent, ev_);
    if (interned_.size()) pk_.msg(trace_packet::kInternedData, interned_);
    sink_.packet(pk_);
  }

 private:
  const View& v_;
  Sink& sink_;
  std::uint32_t seq_;
  std::uint64_t uuid_ = 0;
  Nanos last_;
  bool first_ = true;
  Proto pk_, ev_, interned_;
  std::vector<bool> seen_[4];  // by InternedData field: categories, event names, annotation names
};

// A flow starts on its source's BEGIN and terminates on its target's END: Perfetto
// links flows in time order, and a target may begin before its source when
// their hosts' clocks differ by up to their bound (or an agent's timer fired
// early), but never ends before the source began.
void write_slices(const View& v, Sink& sink, std::uint32_t seq, std::uint32_t ti, const std::vector<FlowEnds>& outs, std::size_t& oi,
                  const std::vector<FlowEnds>& ins, std::size_t& ii) {
  const Track& t = v.tracks[ti];
  SequenceWriter w(v, sink, seq, t, t.slices.front().begin);
  const std::size_t in_begin = ii;
  while (ii < ins.size() && ins[ii].track == ti) ++ii;
  const std::size_t in_end = ii;
  std::vector<std::pair<Nanos, std::uint32_t>> open;  // end and index of the open slices, by depth
  const auto close_to = [&](std::size_t depth) {
    while (open.size() > depth) {
      const auto [end, si] = open.back();
      w.begin_packet(end);
      w.event().u(track_event::kType, track_event::kSliceEnd);
      auto it = std::lower_bound(ins.begin() + static_cast<std::ptrdiff_t>(in_begin), ins.begin() + static_cast<std::ptrdiff_t>(in_end), si,
                                 [](const FlowEnds& f, std::uint32_t s) { return f.slice < s; });
      for (; it != ins.begin() + static_cast<std::ptrdiff_t>(in_end) && it->slice == si; ++it) {
        w.event().fixed64(track_event::kTerminatingFlowIds, it->id);
      }
      w.end_packet();
      open.pop_back();
    }
  };
  for (std::uint32_t si = 0; si < t.slices.size(); ++si) {
    const Slice& s = t.slices[si];
    close_to(s.depth);
    w.begin_packet(s.begin);
    Proto& e = w.event();
    e.u(track_event::kType, track_event::kSliceBegin);
    e.u(track_event::kNameIid, w.name(kInternedEventNames, s.name));
    if (s.category) e.u(track_event::kCategoryIids, w.name(kInternedCategories, s.category));
    for (std::uint32_t a = s.args; a < s.args + s.nargs; ++a) {
      const Arg& x = v.args[a];
      Proto d;
      d.u(kAnnotationNameIid, w.name(kInternedAnnotationNames, x.key));
      if (x.text) {
        d.str(kAnnotationString, v.strings[static_cast<std::size_t>(x.value)]);
      } else {
        d.i(kAnnotationInt, x.value);
      }
      e.msg(track_event::kDebugAnnotations, d);
    }
    for (; oi < outs.size() && outs[oi].track == ti && outs[oi].slice == si; ++oi) e.fixed64(track_event::kFlowIds, outs[oi].id);
    w.end_packet();
    open.emplace_back(s.end, si);
  }
  close_to(0);
}

void write_counter(const View& v, Sink& sink, std::uint32_t seq, const Track& t) {
  SequenceWriter w(v, sink, seq, t, t.samples.front().first);
  for (const auto& [ts, value] : t.samples) {
    w.begin_packet(ts);
    w.event().u(track_event::kType, track_event::kCounter);
    w.event().dbl(track_event::kDoubleCounterValue, value);
    w.end_packet();
  }
}

}  // namespace

std::uint64_t write_perfetto(const View& v, std::ostream& out, const PerfettoOptions& o) {
  if (const std::string bad = check(v); !bad.empty()) throw std::logic_error("view: " + bad);
  Sink sink(out, o.compress);
  // The trace's clock, then every process and track, on sequence 1.
  {
    Proto clocks, clock, p;
    clock.u(kClockId, kRealtime), clock.u(kClockTimestamp, 0);
    clocks.msg(kClockSnapshotClocks, clock);
    clocks.u(kClockSnapshotPrimary, kRealtime);
    p.u(trace_packet::kSequenceId, 1);
    p.msg(trace_packet::kClockSnapshot, clocks);
    sink.packet(p);
  }
  for (const Process& pr : v.processes) {
    Proto d, proc, p;
    proc.i(kProcessPid, pr.pid), proc.str(kProcessName, pr.name);
    d.u(track_descriptor::kUuid, pr.uuid);
    d.msg(track_descriptor::kProcess, proc);
    p.u(trace_packet::kSequenceId, 1);
    p.msg(trace_packet::kTrackDescriptor, d);
    sink.packet(p);
  }
  for (const Track& t : v.tracks) {
    Proto d, p;
    d.u(track_descriptor::kUuid, t.uuid);
    if (t.parent) d.u(track_descriptor::kParentUuid, t.parent);
    d.str(track_descriptor::kName, t.name);
    if (t.kind == TrackKind::counter) {
      Proto c;
      if (t.unit == "bytes") c.u(kCounterUnit, kUnitSizeBytes);
      d.msg(track_descriptor::kCounter, c);
    }
    p.u(trace_packet::kSequenceId, 1);
    p.msg(trace_packet::kTrackDescriptor, d);
    sink.packet(p);
  }
  std::vector<FlowEnds> outs, ins;
  outs.reserve(v.flows.size());
  ins.reserve(v.flows.size());
  for (std::size_t i = 0; i < v.flows.size(); ++i) {
    outs.push_back({v.flows[i].from.track, v.flows[i].from.slice, i + 1, false});
    ins.push_back({v.flows[i].to.track, v.flows[i].to.slice, i + 1, true});
  }
  const auto by_slice = [](const FlowEnds& a, const FlowEnds& b) { return std::tie(a.track, a.slice, a.id) < std::tie(b.track, b.slice, b.id); };
  std::sort(outs.begin(), outs.end(), by_slice);
  std::sort(ins.begin(), ins.end(), by_slice);
  std::size_t oi = 0, ii = 0;
  for (std::uint32_t ti = 0; ti < v.tracks.size(); ++ti) {
    const Track& t = v.tracks[ti];
    const std::uint32_t seq = ti + 2;
    if (t.kind == TrackKind::slices && !t.slices.empty()) write_slices(v, sink, seq, ti, outs, oi, ins, ii);
    if (t.kind == TrackKind::counter && !t.samples.empty()) write_counter(v, sink, seq, t);
  }
  sink.flush();
  return sink.written();
}

}  // namespace tw::view

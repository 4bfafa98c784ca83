// What a timeline shows, whatever it came from (a capture, a run directory, a
// built profile), and the two files it is written as: Perfetto's protobuf
// TrackEvent format and the legacy trace-event JSON (docs/view.md).
//
// A View is processes (a rank, or a traced process), each with tracks; a track
// holds slices that nest (each inside its parent, siblings one after the other),
// or a counter's samples. A message drawn with its stages is a slice with
// children; messages in flight at once go to separate lanes (tracks of one
// group, kept apart so that each lane nests). Flows are arrows between slices.
// The builders guarantee the nesting; the writers refuse a view that breaks it
// (std::logic_error), so a file never holds a track Perfetto would misdraw.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensorwire/core/units.hpp"

namespace tw::view {

using StrId = std::uint32_t;  // index into View::strings

struct Arg {
  StrId key = 0;
  bool text = false;     // value is a StrId
  std::int64_t value = 0;
};

struct Slice {
  Nanos begin = 0, end = 0;
  StrId name = 0;
  StrId category = 0;
  std::uint32_t depth = 0;  // 0: on the track itself; d: inside the last slice of depth d-1 before it
  std::uint32_t args = 0, nargs = 0;  // View::args[args, args + nargs)
};

enum class TrackKind : std::uint8_t { group, slices, counter };

struct Track {
  std::uint64_t uuid = 0;
  std::uint64_t parent = 0;  // a process's or a group's uuid
  std::string name;
  TrackKind kind = TrackKind::slices;
  std::string unit;  // counters: what a value counts ("bytes", "segments", "bit/s")
  std::vector<Slice> slices;  // by begin; each slice's children right after it
  std::vector<std::pair<Nanos, double>> samples;  // counters, by time
};

struct Process {
  std::uint64_t uuid = 0;
  int pid = 0;
  std::string name;  // "rank 1 (host b)"
};

struct SliceRef {
  std::uint32_t track = 0, slice = 0;
};
struct Arrow {
  SliceRef from, to;
};

struct View {
  std::vector<Process> processes;
  std::vector<Track> tracks;
  std::vector<Arrow> flows;  // flow arrows
  std::vector<std::string> strings{""};
  std::vector<Arg> args;
  // What a reader should know: the source, the clock and its bound, counts.
  nlohmann::json metadata = nlohmann::json::object();

  StrId intern(std::string_view s);
  std::uint64_t add_process(int pid, std::string name);
  // A track under `parent` (a process's or a group's uuid); returns its index.
  std::uint32_t add_track(std::uint64_t parent, std::string name, TrackKind kind, std::string unit = "");
  // Appends a slice; returns its reference. Args follow with add_arg.
  SliceRef add_slice(std::uint32_t track, Nanos begin, Nanos end, StrId name, std::uint32_t depth = 0, StrId category = 0);
  // A flow arrow from `from` to `to`, unless `to` ends before `from` begins (or
  // just as it begins): a viewer links a flow's ends in time order and would
  // drop it. That happens only between hosts, by less than their clocks' bound;
  // such arrows are counted in `unlinked` instead. Returns whether it was drawn.
  bool link(SliceRef from, SliceRef to);
  std::size_t unlinked = 0;
  Nanos unlinked_by = 0;  // the most by which such an arrow ran backwards
  void add_arg(SliceRef s, std::string_view key, std::int64_t value);
  void add_arg(SliceRef s, std::string_view key, std::string_view value);

  // Takes in `other`'s processes (named PREFIX + their name), tracks, flows and
  // strings, its times moved by `shift`.
  void absorb(View other, const std::string& prefix, Nanos shift);
  // The earliest time of any slice or sample (0 when empty).
  Nanos first_time() const;

  std::size_t slice_count() const;
  std::size_t sample_count() const;

 private:
  std::unordered_map<std::string, StrId> ids_;
  std::uint64_t next_uuid_ = 1;
};

// Where messages in flight at once go: per group of tracks, the lane that became
// free first if it is free when this one begins, else a new lane.
class Lanes {
 public:
  Lanes(View& v, std::uint64_t group, std::string name) : v_(v), group_(group), name_(std::move(name)) {}
  // The track a slice [begin, end] goes to.
  std::uint32_t place(Nanos begin, Nanos end);
  std::size_t count() const { return tracks_.size(); }

 private:
  View& v_;
  std::uint64_t group_;
  std::string name_;
  std::vector<std::uint32_t> tracks_;
  // (when free, lane index), the earliest free on top.
  std::priority_queue<std::pair<Nanos, std::size_t>, std::vector<std::pair<Nanos, std::size_t>>, std::greater<>> free_;
};

// A counter's samples thinned to at most one per `bin` (the last in each, the
// bin's maximum for peaks kept visible by `peak`), and repeats dropped.
std::vector<std::pair<Nanos, double>> downsample(std::vector<std::pair<Nanos, double>> samples, Nanos bin, bool peak);

// Checks what the writers need: slices nest on every track, flows name existing
// slices, samples are in time order. Returns "" or what is wrong.
std::string check(const View& v);

struct PerfettoOptions {
  bool compress = true;  // packets deflated in chunks (TracePacket.compressed_packets)
};
// Perfetto's protobuf trace (perfetto.protos.Trace); throws std::logic_error when
// check() fails. Returns the bytes written.
std::uint64_t write_perfetto(const View& v, std::ostream& out, const PerfettoOptions& o = {});

// The legacy trace-event JSON (chrome://tracing and Perfetto): a thread per lane,
// complete events, flows by bind_id. Throws std::logic_error when check() fails.
void write_trace_json(const View& v, std::ostream& out);

}  // namespace tw::view

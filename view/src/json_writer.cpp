// The legacy trace-event JSON: a process per View process, a thread per slice
// track (each lane its own thread, so that complete events on it nest), counters
// as "C" events, flows as flow events ("s" and "f") bound to their slices.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "tensorwire/view/view.hpp"

namespace tw::view {
namespace {

void escaped(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Microseconds with the nanoseconds kept.
void micros(std::string& out, Nanos t) {
  const Nanos a = t < 0 ? -t : t;
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", t < 0 ? "-" : "", a / 1000, a % 1000);
}

}  // namespace

void write_trace_json(const View& v, std::ostream& os) {
  if (const std::string bad = check(v); !bad.empty()) throw std::logic_error("view: " + bad);
  std::string out;
  out.reserve(1 << 20);
  const auto flush = [&] {
    os.write(out.data(), static_cast<std::streamsize>(out.size()));
    out.clear();
  };
  // pids and tids of our own: real pids repeat across hosts.
  std::unordered_map<std::uint64_t, std::size_t> process_of;  // uuid -> index
  for (std::size_t i = 0; i < v.processes.size(); ++i) process_of[v.processes[i].uuid] = i;
  std::unordered_map<std::uint64_t, std::size_t> track_of;
  for (std::size_t i = 0; i < v.tracks.size(); ++i) track_of[v.tracks[i].uuid] = i;
  // A track's process, and its name with its groups' names before it.
  std::vector<std::size_t> pid(v.tracks.size(), 0);
  std::vector<std::string> name(v.tracks.size());
  for (std::size_t i = 0; i < v.tracks.size(); ++i) {
    std::uint64_t up = v.tracks[i].parent;
    name[i] = v.tracks[i].name;
    for (int guard = 0; guard < 64 && up; ++guard) {
      if (const auto p = process_of.find(up); p != process_of.end()) {
        pid[i] = p->second + 1;
        break;
      }
      const auto t = track_of.find(up);
      if (t == track_of.end()) break;
      const Track& g = v.tracks[t->second];
      if (g.name != v.tracks[i].name) name[i] = g.name + " / " + name[i];
      up = g.parent;
    }
  }
  // Times from the first one: epoch microseconds in a double would lose the nanoseconds.
  const Nanos t0 = v.first_time();
  nlohmann::json meta = v.metadata;
  meta["time_zero_ns"] = t0;
  meta["time_zero"] = "ts 0 is this CLOCK_REALTIME time (ns)";
  out += "{\"displayTimeUnit\":\"ns\",\"metadata\":";
  out += meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += ",\"traceEvents\":[\n";
  bool first = true;
  const auto event = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (std::size_t i = 0; i < v.processes.size(); ++i) {
    event();
    fmt::format_to(std::back_inserter(out), "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":", i + 1);
    escaped(out, v.processes[i].name);
    out += "}}";
  }
  // Lanes of one group are numbered in the thread names, in order.
  std::unordered_map<std::string, int> lane_seen;
  for (std::size_t i = 0; i < v.tracks.size(); ++i) {
    const Track& t = v.tracks[i];
    if (t.kind != TrackKind::slices || t.slices.empty()) continue;
    const std::string key = std::to_string(pid[i]) + "/" + name[i];
    const int lane = lane_seen[key]++;
    event();
    fmt::format_to(std::back_inserter(out), "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", pid[i], i + 1);
    escaped(out, lane == 0 ? name[i] : name[i] + " #" + std::to_string(lane + 1));
    out += "}},\n";
    fmt::format_to(std::back_inserter(out), "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
                   pid[i], i + 1, i);
  }
  for (std::uint32_t ti = 0; ti < v.tracks.size(); ++ti) {
    const Track& t = v.tracks[ti];
    for (std::uint32_t si = 0; si < t.slices.size(); ++si) {
      const Slice& s = t.slices[si];
      event();
      out += "{\"ph\":\"X\",\"name\":";
      escaped(out, v.strings[s.name]);
      if (s.category) out += ",\"cat\":", escaped(out, v.strings[s.category]);
      fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"tid\":{},\"ts\":", pid[ti], ti + 1);
      micros(out, s.begin - t0);
      out += ",\"dur\":";
      micros(out, s.end - s.begin);
      if (s.nargs) {
        out += ",\"args\":{";
        for (std::uint32_t a = s.args; a < s.args + s.nargs; ++a) {
          if (a > s.args) out += ',';
          escaped(out, v.strings[v.args[a].key]);
          out += ':';
          if (v.args[a].text) {
            escaped(out, v.strings[static_cast<std::size_t>(v.args[a].value)]);
          } else {
            fmt::format_to(std::back_inserter(out), "{}", v.args[a].value);
          }
        }
        out += '}';
      }
      out += '}';
      if (out.size() > (1 << 20)) flush();
    }
    for (const auto& [ts, value] : t.samples) {
      event();
      out += "{\"ph\":\"C\",\"name\":";
      escaped(out, name[ti]);
      fmt::format_to(std::back_inserter(out), ",\"pid\":{},\"ts\":", pid[ti]);
      micros(out, ts - t0);
      fmt::format_to(std::back_inserter(out), ",\"args\":{{\"value\":{}}}}}", value);
      if (out.size() > (1 << 20)) flush();
    }
  }
  // Flows (the first version of the format, which every viewer reads): each
  // end binds to the slice open at its time on its thread, the deepest one when
  // a slice and its first stage begin together.
  for (std::size_t i = 0; i < v.flows.size(); ++i) {
    for (const bool to : {false, true}) {
      const SliceRef& r = to ? v.flows[i].to : v.flows[i].from;
      event();
      fmt::format_to(std::back_inserter(out), "{{\"ph\":\"{}\",\"id\":{},\"name\":\"flow\",\"cat\":\"flow\",{}\"pid\":{},\"tid\":{},\"ts\":",
                     to ? "f" : "s", i + 1, to ? "\"bp\":\"e\"," : "", pid[r.track], r.track + 1);
      // The end inside its slice, and not before the source began (a viewer
      // links flow events in time order).
      const Slice& sl = v.tracks[r.track].slices[r.slice];
      const Nanos from = v.tracks[v.flows[i].from.track].slices[v.flows[i].from.slice].begin;
      micros(out, (to ? std::clamp(from, sl.begin, std::max(sl.begin, sl.end - 1)) : sl.begin) - t0);
      out += '}';
    }
    if (out.size() > (1 << 20)) flush();
  }
  out += "\n]}\n";
  flush();
}

}  // namespace tw::view

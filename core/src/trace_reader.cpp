#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/util/printable.hpp"

namespace tw {

namespace fs = std::filesystem;

std::string ProcessTrace::rank_text() const {
  for (const char* k : {"RANK", "OMPI_COMM_WORLD_RANK"}) {
    if (const auto it = env.find(k); it != env.end()) return "rank " + it->second;
  }
  if (const auto it = env.find("TW_ROLE"); it != env.end()) return it->second;
  return {};
}

namespace {

// A realtime clock steps (NTP, a leap second), and a job's daemons outlive the
// capture: how far events may lie outside it.
constexpr std::int64_t kClockSlack = 3600LL * 1'000'000'000LL;

}  // namespace

namespace {

// What the session files of `dir` say of its captures' times: when the first
// started, and whether every one has ended (a directory without a session file,
// copied without it or older, counts as ended). A session file that does not
// read, or does not say, bounds nothing here; the wire reader reports what is
// wrong with it. Read once for both (it was read apart for each).
struct SessionTimes {
  std::int64_t first_start = std::numeric_limits<std::int64_t>::max();  // max: none known
  bool all_ended = true;
};

SessionTimes session_times(const std::string& dir) {
  SessionTimes t;
  for (const std::string& file : capture_dir::session_files(dir)) {
    nlohmann::json c;
    try {
      c = read_json_file(file);
    } catch (const std::exception&) {
      continue;
    }
    if (!c.is_object()) continue;
    const auto started = c.find("started_ns");
    if (started != c.end() && started->is_number_integer() && started->get<std::int64_t>() > 0) {
      t.first_start = std::min(t.first_start, started->get<std::int64_t>());
    }
    const auto ended = c.find("ended_ns");
    if (ended == c.end() || !ended->is_number_integer() || ended->get<std::int64_t>() <= 0) t.all_ended = false;
  }
  return t;
}

TimeSpan span_from(std::int64_t first) {
  TimeSpan s;
  if (first == std::numeric_limits<std::int64_t>::max()) return s;
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  s.lo = first - std::min(first, kClockSlack);
  const std::int64_t latest = std::max<std::int64_t>(first, now);
  s.hi = latest > std::numeric_limits<std::int64_t>::max() - kClockSlack ? std::numeric_limits<std::int64_t>::max() : latest + kClockSlack;
  s.what = "from an hour before the capture started to an hour from now";
  return s;
}

}  // namespace

TimeSpan capture_span(const std::string& dir) { return span_from(session_times(dir).first_start); }

namespace {

std::string event_at(const ProcessTrace& t) { return t.file + ": event " + std::to_string(t.event_count() + 1); }

void check_time(const ProcessTrace& t, std::int64_t at, const TimeSpan& span) {
  if (!span.holds(at)) throw std::runtime_error(event_at(t) + ": a time of " + std::to_string(at) + " ns, not " + span.what);
}

ProcessTrace read_one(const fs::path& json_path, const TimeSpan& span) {
  ProcessTrace t;
  const nlohmann::json j = read_json_file(json_path.string());
  if (!j.is_object()) throw std::runtime_error(json_path.string() + ": not a trace description");
  // Each field checked by name: a wrong type said "type must be number, but is
  // string", and not which field.
  const std::string path = json_path.string();
  t.pid = static_cast<int>(json_count(j, "pid", path, INT32_MAX));
  t.ppid = static_cast<int>(json_count(j, "ppid", path, INT32_MAX));
  // What is printed of a process (trace show, the tables of profile build and
  // analyze) is the job's own text: its control characters escaped, as a run
  // directory's are (a cmdline could retitle or clear the reader's terminal).
  t.host = printable(json_string(j, "host", path));
  t.final = json_bool(j, "final", path);
  t.events_written = json_count(j, "events_written", path, UINT64_MAX);
  t.events_dropped = json_count(j, "events_dropped", path, UINT64_MAX);
  t.untracked = json_count(j, "untracked", path, UINT64_MAX);
  t.wire = json_string(j, "wire", path, "none");
  if (j.contains("cmdline")) {
    if (!j["cmdline"].is_array() || !std::all_of(j["cmdline"].begin(), j["cmdline"].end(), [](const auto& a) { return a.is_string(); })) {
      throw std::runtime_error(path + ": 'cmdline' must list strings");
    }
    for (const auto& a : j["cmdline"]) t.cmdline.push_back(printable(a.get<std::string>()));
  }
  if (j.contains("env")) {
    if (!j["env"].is_object()) throw std::runtime_error(path + ": 'env' must map names to strings");
    for (const auto& [k, v] : j["env"].items()) {
      if (!v.is_string()) throw std::runtime_error(path + ": 'env' '" + printable(k) + "' must be a string");
      t.env[printable(k)] = printable(v.get<std::string>());
    }
  }
  fs::path twt = json_path;
  twt.replace_extension(".twt");
  t.file = twt.string();
  std::ifstream in = open_data_file(t.file, limits::kMaxDataFile);
  unsigned char header[binary_file::kHeaderSize];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  const std::string bad = binary_file::check_header(header, static_cast<std::size_t>(in.gcount()), trace::kMagic, "trace",
                                                    trace::kVersion, sizeof(trace::Event));
  if (!bad.empty()) throw std::runtime_error(t.file + ": " + bad);
  unsigned char buf[64];
  for (;;) {
    in.read(reinterpret_cast<char*>(buf), 64);
    const auto got = in.gcount();
    if (got == 0) break;
    if (got != 64) {
      ++t.events_dropped;  // the last event of a process killed mid-write
      break;
    }
    switch (static_cast<trace::Kind>(buf[0])) {
      case trace::Kind::conn: {
        trace::ConnEvent e;
        std::memcpy(&e, buf, 64);
        check_time(t, e.at_ns, span);
        t.conns.push_back(e);
        break;
      }
      case trace::Kind::tcp_info: {
        trace::TcpInfoEvent e;
        std::memcpy(&e, buf, 64);
        check_time(t, e.at_ns, span);
        t.tcp_info.push_back(e);
        break;
      }
      case trace::Kind::mark: {
        trace::MarkEvent e;
        std::memcpy(&e, buf, 64);
        e.name[sizeof e.name - 1] = 0;
        check_time(t, e.at_ns, span);
        t.marks.push_back(e);
        break;
      }
      case trace::Kind::sample: {
        trace::SampleEvent e;
        std::memcpy(&e, buf, 64);
        if (e.head_len > trace::kSampleHead || e.tail_len > trace::kSampleTail) {
          throw std::runtime_error(event_at(t) + ": sample longer than its event");
        }
        t.samples.push_back(e);
        break;
      }
      case trace::Kind::send:
      case trace::Kind::recv:
      case trace::Kind::connect:
      case trace::Kind::accept:
      case trace::Kind::close:
      case trace::Kind::shutdown: {
        trace::Event e;
        std::memcpy(&e, buf, 64);
        check_time(t, e.enter_ns, span);
        check_time(t, e.exit_ns, span);
        // CLOCK_REALTIME may step back while a call blocks (an NTP step, a leap
        // second): such a call took no time we know of. Further back than a step
        // would go, the event is damaged.
        if (e.exit_ns < e.enter_ns) {
          if (e.enter_ns - e.exit_ns > kClockSlack) {
            throw std::runtime_error(event_at(t) + ": a call that returned " + std::to_string(e.enter_ns - e.exit_ns) +
                                     " ns before it was entered");
          }
          e.exit_ns = e.enter_ns;
        }
        // A call moves at most what it asked for, and a stream's offsets fit in
        // 64 bits: anything else is a damaged file, not bytes the job moved.
        if ((e.kind == trace::Kind::send || e.kind == trace::Kind::recv) && e.result > 0 &&
            (static_cast<std::uint64_t>(e.result) > e.requested || e.offset > UINT64_MAX - static_cast<std::uint64_t>(e.result))) {
          throw std::runtime_error(event_at(t) + ": " +
                                   (e.kind == trace::Kind::send ? "a send" : "a receive") + " of " + std::to_string(e.result) +
                                   " bytes at stream offset " + std::to_string(e.offset) + " that asked for " +
                                   std::to_string(e.requested));
        }
        t.io.push_back(e);
        break;
      }
      default:
        throw std::runtime_error(t.file + ": unknown event kind " + std::to_string(buf[0]));
    }
  }
  // A file cut short (copied half, a full disk) holds fewer events than its
  // description counted: not complete, whatever the process said at its exit.
  if (t.events_written > t.event_count()) t.events_missing = t.events_written - t.event_count();
  return t;
}

}  // namespace

std::vector<ProcessTrace> read_capture_dir(const std::string& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + ": not a capture directory");
  std::vector<fs::path> files;
  std::vector<fs::path> events;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (capture_dir::is_description(name)) files.push_back(e.path());
    if (name.starts_with(capture_dir::kTracePrefix) && name.ends_with(capture_dir::kEventsExtension)) events.push_back(e.path());
  }
  // A process's events without its description (lost, or not copied) were left
  // out without a word. The shim writes the description right after the file's
  // header, and again when the process ends if it could not then (no descriptor
  // or space left): once every capture that wrote into the directory has ended,
  // events without a description are damage. While one runs, that process is
  // left out, as one that has just started.
  const SessionTimes sessions = session_times(dir);
  if (!events.empty() && sessions.all_ended) {
    for (const fs::path& twt : events) {
      fs::path description = twt;
      description.replace_extension(capture_dir::kDescriptionExtension);
      std::error_code ec;
      const auto size = fs::file_size(twt, ec);
      if (!ec && size > binary_file::kHeaderSize && !fs::exists(description, ec)) {
        throw std::runtime_error(twt.string() + ": holds events, but its description " + description.filename().string() +
                                 " is missing (copy it with the capture, or remove both)");
      }
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<ProcessTrace> out;
  const TimeSpan span = span_from(sessions.first_start);
  for (const auto& f : files) out.push_back(naming_file_on_oom(f.string(), [&] { return read_one(f, span); }));
  std::sort(out.begin(), out.end(), [](const ProcessTrace& a, const ProcessTrace& b) { return a.pid < b.pid; });
  return out;
}

namespace capture_dir {
std::vector<std::string> session_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_session_file(e.path().filename().string())) out.push_back(e.path().string());
  }
  if (ec) throw std::runtime_error(dir + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> listed_wire_files(const std::string& dir, const std::vector<std::string>& listed, const std::string& session) {
  if (listed.size() > kMaxWireFiles) {
    throw std::runtime_error(session + ": lists " + std::to_string(listed.size()) + " wire files, more than " + std::to_string(kMaxWireFiles));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& name : listed) {
    if (name.find('/') != std::string::npos || !name.starts_with(kWirePrefix) || !name.ends_with(kWireExtension)) {
      throw std::runtime_error(session + ": lists \"" + safe_name_part(name.substr(0, 64)) + "\" among its wire files, which is no wire file's name (" +
                               kWirePrefix + "*" + kWireExtension + " in the capture directory)");
    }
    if (!seen.insert(name).second) throw std::runtime_error(session + ": lists the wire file " + name + " twice");
    out.push_back(dir + "/" + name);
  }
  return out;
}
}  // namespace capture_dir

namespace {

WireCapture session_wire(const std::string& dir, const std::string& file, const nlohmann::json& c, std::uint32_t& files,
                         wire::WireIndex& index, const std::map<std::string, Nanos>& shift_by_host, const TimeSpan& span);

// One session file's wire block; its pcap files, numbered on from `files`, go into
// `index`, their frames within `span` (the directory's, on the host's own clock).
WireCapture read_session_wire(const std::string& dir, const std::string& file, std::uint32_t& files, wire::WireIndex& index,
                              const std::map<std::string, Nanos>& shift_by_host, const TimeSpan& span) {
  const nlohmann::json c = read_json_file(file);
  if (!c.is_object()) throw std::runtime_error(file + ": not a capture session (a JSON object expected)");
  return with_file(file, [&] { return session_wire(dir, file, c, files, index, shift_by_host, span); });
}

WireCapture session_wire(const std::string& dir, const std::string& file, const nlohmann::json& c, std::uint32_t& files,
                         wire::WireIndex& index, const std::map<std::string, Nanos>& shift_by_host, const TimeSpan& span) {
  WireCapture w;
  const nlohmann::json wire = c.value("wire", nlohmann::json::object());
  if (!wire.is_object()) {
    w.mode = "off";
    w.status = "no wire tap in this capture";
    return w;
  }
  const auto host = c.find("host");
  const auto shifted = host != c.end() && host->is_string() ? shift_by_host.find(host->get<std::string>()) : shift_by_host.end();
  const Nanos shift = shifted == shift_by_host.end() ? 0 : shifted->second;
  w.mode = wire.value("mode", "off");
  w.status = printable(wire.value("error", ""));
  w.dropped = wire.value("dropped", std::uint64_t{0});
  if (w.mode == "off") w.status = "no wire tap in this capture (--wire off)";
  if (!wire.contains("files") || !wire["files"].is_array()) {
    if (w.status.empty()) w.status = "no wire tap in this capture";
    return w;
  }
  const std::string listed_in = fs::path(file).filename().string();
  std::vector<std::string> names;
  for (const auto& f : wire["files"]) {
    if (!f.is_string()) throw std::runtime_error(file + ": 'wire' 'files' must list file names");
    names.push_back(f.get<std::string>());
  }
  for (const std::string& path : capture_dir::listed_wire_files(dir, names, file)) {
    if (!fs::exists(path)) throw std::runtime_error(path + ": listed in " + listed_in + " but missing");
    wire::PcapRead r = wire::read_pcap(path, files++, span);
    w.frames += r.frames;
    w.truncated = w.truncated || r.truncated;
    if (shift != 0) {
      for (wire::Segment& seg : r.segments) seg.ts -= shift;
    }
    index.add(std::move(r.segments));
  }
  for (const auto& i : wire.value("interfaces", nlohmann::json::array())) w.interfaces.push_back(i.get<std::string>());
  return w;
}

void add_once(std::vector<std::string>& to, const std::string& s) {
  if (!s.empty() && std::find(to.begin(), to.end(), s) == to.end()) to.push_back(s);
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

// Every session of the directory (capture.json, and capture-HOST-PID.json of
// captures that wrote into it together): their wire files in one index.
WireCapture read_wire_capture(const std::string& dir) { return read_wire_captures({dir}, {}); }

WireCapture read_wire_captures(const std::vector<std::string>& dirs, const std::map<std::string, Nanos>& shift_by_host) {
  WireCapture w;
  std::uint32_t files = 0;
  std::vector<std::string> modes, statuses;
  bool any = false;
  for (const auto& dir : dirs) {
    const std::vector<std::string> sessions = fs::is_directory(dir) ? capture_dir::session_files(dir) : std::vector<std::string>{};
    const TimeSpan span = sessions.empty() ? TimeSpan{} : capture_span(dir);
    for (const auto& file : sessions) {
      any = true;
      const WireCapture s = read_session_wire(dir, file, files, w.index, shift_by_host, span);
      add_once(modes, s.mode);
      add_once(statuses, s.status);
      w.frames += s.frames;
      w.dropped += s.dropped;
      w.truncated = w.truncated || s.truncated;
      for (const auto& i : s.interfaces) add_once(w.interfaces, i);
    }
  }
  if (!any) return w;
  w.mode = joined(modes, ",");
  w.status = joined(statuses, "; ");
  w.index.finish();
  return w;
}

}  // namespace tw

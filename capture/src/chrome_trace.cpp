#include "tensorwire/util/printable.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/capture/chrome_trace.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {

namespace fs = std::filesystem;

namespace {

// Microseconds since the epoch are above this (2001); smaller values are relative.
constexpr double kEpochMicros = 1e15;

std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  return v.is_null() ? std::string() : v.dump();
}

// Every time is held within +-2^62 ns (146 years either side of 1970): a base, a
// timestamp and a duration then add up without overflow.
constexpr Nanos kMostNs = Nanos{1} << 62;

// Microseconds to nanoseconds without losing what a double can hold: epoch
// microseconds (~1.8e15) times 1000 would exceed a double's exact integers.
// Throws on a value outside +-kMostNs ("what" names the field).
Nanos micros_to_ns(const nlohmann::json& v, const std::string& what) {
  constexpr std::int64_t kMostMicros = kMostNs / 1000;
  if (v.is_number_integer()) {
    const auto us = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMostMicros)
                        ? kMostMicros + 1
                        : v.get<std::int64_t>();
    if (us > kMostMicros || us < -kMostMicros) throw std::runtime_error(what + " " + v.dump() + " us is out of range");
    return us * 1000;
  }
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::abs(d) >= static_cast<double>(kMostMicros)) {
    throw std::runtime_error(what + " " + v.dump() + " us is out of range");
  }
  const double whole = std::floor(d);
  return static_cast<Nanos>(whole) * 1000 + std::llround((d - whole) * 1e3);
}

// A base or start time in nanoseconds, held to [0, kMostNs).
Nanos checked_start(Nanos t, const std::string& what) {
  if (t < 0 || t >= kMostNs) throw std::runtime_error(what + " " + std::to_string(t) + " ns is out of range");
  return t;
}

std::vector<ImportedOp> import_events(const std::string& path, const nlohmann::json& j, const ImportOptions& o,
                                      const std::vector<ProcessTrace>& traces, Nanos capture_begin, Nanos capture_end) {
  const nlohmann::json* events = &j;
  if (j.is_object()) {
    if (!j.contains("traceEvents") || !j["traceEvents"].is_array()) throw std::runtime_error(path + ": no traceEvents array");
    events = &j["traceEvents"];
  } else if (!j.is_array()) {
    throw std::runtime_error(path + ": not a Chrome trace (an object with traceEvents, or an array of events)");
  }
  Nanos base_ns = 0;  // newer PyTorch profilers: ts relative to baseTimeNanoseconds
  if (j.is_object() && j.contains("baseTimeNanoseconds") && j["baseTimeNanoseconds"].is_number()) {
    const auto& b = j["baseTimeNanoseconds"];
    const double d = b.get<double>();
    if (!(d >= 0 && d < static_cast<double>(kMostNs))) throw std::runtime_error(path + ": baseTimeNanoseconds " + b.dump() + " is out of range");
    base_ns = b.is_number_integer() ? b.get<Nanos>() : static_cast<Nanos>(d);
  }

  std::vector<ImportedOp> ops;
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<std::string, Nanos>>> open;  // (pid, tid) -> B stack
  double min_ts = INFINITY;  // microseconds
  struct Raw {
    std::string pid, tid, name, cat;
    Nanos ts, dur;
  };
  std::vector<Raw> raw;
  std::size_t index = 0;
  for (const auto& e : *events) {
    ++index;
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) continue;
    const std::string ph = e["ph"].get<std::string>();
    if (ph != "X" && ph != "B" && ph != "E") continue;
    if (!e.contains("ts") || !e["ts"].is_number()) throw std::runtime_error(path + ": event " + std::to_string(index) + ": no numeric ts");
    const double ts = e["ts"].get<double>();
    const std::string where = path + ": event " + std::to_string(index) + ":";
    const Nanos ts_ns = micros_to_ns(e["ts"], where + " ts");
    const std::string pid = text_of(e.value("pid", nlohmann::json())), tid = text_of(e.value("tid", nlohmann::json()));
    const std::string name = e.value("name", std::string("?"));
    const std::string cat = e.contains("cat") ? text_of(e["cat"]) : std::string();
    if (ph == "X") {
      const Nanos dur = e.contains("dur") && e["dur"].is_number() ? micros_to_ns(e["dur"], where + " dur") : 0;
      raw.push_back({pid, tid, name, cat, ts_ns, std::max<Nanos>(0, dur)});
    } else if (ph == "B") {
      open[{pid, tid}].push_back({name, ts_ns});
      continue;
    } else {
      auto& st = open[{pid, tid}];
      if (st.empty()) continue;
      raw.push_back({pid, tid, st.back().first, cat, st.back().second, std::max<Nanos>(0, ts_ns - st.back().second)});
      st.pop_back();
    }
    min_ts = std::min(min_ts, ts);
  }
  if (raw.empty()) throw std::runtime_error(path + ": no complete (X) or begin/end (B/E) events");
  Nanos offset = 0;
  if (base_ns > 0) {
    offset = base_ns;
  } else if (min_ts < kEpochMicros) {
    if (!o.start_ns) {
      throw std::runtime_error(path + ": its timestamps are relative (the first at " + std::to_string(min_ts) +
                               " us); give --start-ns, the profile's time 0 on CLOCK_REALTIME");
    }
    offset = checked_start(*o.start_ns, "--start-ns");
  }
  std::map<std::string, int> pids;
  for (const auto& t : traces) pids[std::to_string(t.pid)] = t.pid;
  for (const Raw& r : raw) {
    ImportedOp op;
    if (o.pid) {
      op.pid = *o.pid;
    } else if (const auto it = pids.find(r.pid); it != pids.end()) {
      op.pid = it->second;
    } else {
      throw std::runtime_error(path + ": process \"" + r.pid + "\" is not one of the capture's; give --pid");
    }
    op.thread = r.tid;
    op.name = r.name;
    op.category = r.cat;
    op.begin = offset + r.ts;
    if (op.begin <= -kMostNs || op.begin >= kMostNs || r.dur >= kMostNs) {
      throw std::runtime_error(path + ": op \"" + r.name + "\" at " + std::to_string(op.begin) + " ns for " + std::to_string(r.dur) +
                               " ns is out of range");
    }
    op.end = op.begin + r.dur;
    ops.push_back(std::move(op));
  }
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  // A wrong clock puts everything outside the job's life: say so instead of drawing it.
  if (capture_end > capture_begin && (ops.back().end < capture_begin - kSecond || ops.front().begin > capture_end + kSecond)) {
    throw std::runtime_error(path + ": its ops fall outside the capture (" + human_duration(std::abs(ops.front().begin - capture_begin)) +
                             " away); check --start-ns");
  }
  return ops;
}

}  // namespace

std::vector<ImportedOp> import_chrome_trace(const std::string& path, const ImportOptions& o, const std::vector<ProcessTrace>& traces,
                                            Nanos capture_begin, Nanos capture_end) {
  const nlohmann::json j = read_json_file(path, limits::kMaxChromeTrace);
  return with_file(path, [&] { return import_events(path, j, o, traces, capture_begin, capture_end); });
}

void write_imported_ops(const std::string& dir, const std::string& name, const std::string& source, const std::vector<ImportedOp>& ops) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& op : ops) {
    a.push_back({{"pid", op.pid}, {"thread", op.thread}, {"name", op.name}, {"category", op.category}, {"begin_ns", op.begin}, {"end_ns", op.end}});
  }
  const nlohmann::json j = {{"format", "tensorwire-ops"}, {"version", 1}, {"source", source}, {"ops", a}};
  write_file_atomic(capture_dir::ops_file(dir, name), j.dump() + "\n");
}

std::vector<ImportedOp> read_imported_ops(const std::string& dir) {
  std::vector<ImportedOp> ops;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (capture_dir::is_ops(n)) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const nlohmann::json j = read_json_file(f.string(), limits::kMaxChromeTrace);
    if (!j.is_object() || !j.contains("ops") || !j["ops"].is_array()) {
      throw std::runtime_error(f.string() + ": not an imported-ops file");
    }
    with_file(f.string(), [&] {
      for (const auto& x : j["ops"]) {
        // Names a profiler wrote, printed by trace show: control characters escaped.
        ops.push_back({x.value("pid", 0), printable(x.value("thread", "")), printable(x.value("name", "")),
                       printable(x.value("category", "")), x.value("begin_ns", Nanos{0}), x.value("end_ns", Nanos{0})});
      }
    });
  }
  return ops;
}

}  // namespace tw

#include "tensorwire/capture/chrome_trace.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/util/printable.hpp"

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

// An event as it was read, before its times are placed on the capture's clock.
struct RawEvent {
  std::string pid, tid, name, cat;
  Nanos ts, dur;
};

// A JSON file of items, read as they stream past (nlohmann's SAX interface),
// never as a document, which took 20 times the file (1.8 GB for an 86 MB
// Chrome trace, which may be 4 GiB): an array of objects, at the top or under
// the top object's key `items`. Each item's own fields go to item_field() (an
// object or array among them empty), what lies deeper in it nowhere;
// the top object's scalar fields to root_field(); item_end() ends an item.
// Elements of the array that are no objects are counted (index()) and passed
// over. A file nested deeper than every JSON file may be (64 levels) is refused.
class ItemStream : public nlohmann::json_sax<nlohmann::json> {
 public:
  ItemStream(std::string path, std::string items, bool array_at_top)
      : path_(std::move(path)), items_(std::move(items)), array_at_top_(array_at_top) {}

  // Reads the file (within `max_bytes`); throws std::runtime_error "PATH: reason".
  void read(std::uint64_t max_bytes) {
    {
      const std::string text = read_data_file_text(path_, max_bytes);
      nlohmann::json::sax_parse(text, this);
    }
    if (!items_seen_) throw std::runtime_error(path_ + ": " + missing_items());
  }

  bool null() override { return scalar(nlohmann::json()); }
  bool boolean(bool v) override { return scalar(nlohmann::json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(nlohmann::json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(nlohmann::json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(nlohmann::json(v)); }
  bool string(string_t& v) override { return scalar(nlohmann::json(std::move(v))); }
  bool binary(binary_t&) override { return scalar(nlohmann::json()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw std::runtime_error(path_ + ": not valid JSON: " + json_error_text(e));
  }

 protected:
  const std::string& path() const { return path_; }
  std::size_t index() const { return index_; }  // of the item in the array, from 1
  virtual std::string missing_items() const = 0;  // what the file lacks without its items' array
  virtual void root_field(const std::string& key, nlohmann::json& value) = 0;
  virtual void item_begin() = 0;
  virtual void item_field(const std::string& key, nlohmann::json& value) = 0;
  virtual void item_end() = 0;

 private:
  enum class Kind : std::uint8_t { root, items, item, skip };
  static constexpr std::size_t kMaxDepth = 64;

  bool open(bool object) {
    if (depth_.size() >= kMaxDepth) throw std::runtime_error(path_ + ": nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    Kind k = Kind::skip;
    if (depth_.empty()) {
      if (object) {
        k = Kind::root;
      } else if (array_at_top_) {
        items_seen_ = true;
        k = Kind::items;
      }
    } else if (depth_.back() == Kind::root && !object && key_ == items_) {
      items_seen_ = true;
      k = Kind::items;
    } else if (depth_.back() == Kind::items) {
      ++index_;
      if (object) {
        k = Kind::item;
        item_begin();
      }
    } else if (depth_.back() == Kind::item) {
      // No string, number or null: a field that must be one is refused.
      nlohmann::json what(object ? nlohmann::json::value_t::object : nlohmann::json::value_t::array);
      item_field(key_, what);
    }
    depth_.push_back(k);
    return true;
  }

  bool close() {
    const Kind k = depth_.back();
    depth_.pop_back();
    if (k == Kind::item) item_end();
    return true;
  }

  bool scalar(nlohmann::json v) {
    if (depth_.empty()) return true;  // a bare value: no items' array, said at the end
    switch (depth_.back()) {
      case Kind::root: root_field(key_, v); break;
      case Kind::items: ++index_; break;
      case Kind::item: item_field(key_, v); break;
      case Kind::skip: break;
    }
    return true;
  }

  std::string path_, items_;
  bool array_at_top_;
  std::vector<Kind> depth_;
  std::string key_;
  std::size_t index_ = 0;
  bool items_seen_ = false;
};

// The events of a Chrome trace: of each complete (X) or begin/end (B/E) event
// its names and times; of the trace, its events' smallest ts and
// baseTimeNanoseconds.
class ChromeEvents final : public ItemStream {
 public:
  explicit ChromeEvents(std::string path) : ItemStream(std::move(path), "traceEvents", true) {}

  std::vector<RawEvent> raw;
  double min_ts = INFINITY;  // microseconds
  Nanos base_ns = 0;  // newer PyTorch profilers: ts relative to baseTimeNanoseconds

 private:
  struct Event {
    std::string ph, pid, tid, name = "?", cat;
    std::optional<nlohmann::json> ts, dur;  // numbers only
  };

  std::string missing_items() const override { return "no traceEvents array (a Chrome trace is an object with one, or an array of events)"; }

  void root_field(const std::string& key, nlohmann::json& v) override {
    if (key != "baseTimeNanoseconds" || !v.is_number()) return;
    const double d = v.get<double>();
    if (!(d >= 0 && d < static_cast<double>(kMostNs))) throw std::runtime_error(path() + ": baseTimeNanoseconds " + v.dump() + " is out of range");
    base_ns = v.is_number_integer() ? v.get<Nanos>() : static_cast<Nanos>(d);
  }

  void item_begin() override { event_ = Event{}; }

  void item_field(const std::string& key, nlohmann::json& v) override {
    if (key == "ph") event_.ph = v.is_string() ? v.get<std::string>() : std::string();
    else if (key == "ts") event_.ts = v.is_number() ? std::optional<nlohmann::json>(std::move(v)) : std::nullopt;
    else if (key == "dur") event_.dur = v.is_number() ? std::optional<nlohmann::json>(std::move(v)) : std::nullopt;
    else if (key == "pid") event_.pid = text_of(v);
    else if (key == "tid") event_.tid = text_of(v);
    else if (key == "name") event_.name = text_of(v);
    else if (key == "cat") event_.cat = text_of(v);
  }

  void item_end() override {
    Event& e = event_;
    if (e.ph != "X" && e.ph != "B" && e.ph != "E") return;
    const std::string where = path() + ": event " + std::to_string(index()) + ":";
    if (!e.ts) throw std::runtime_error(where + " no numeric ts");
    const double ts = e.ts->get<double>();
    const Nanos ts_ns = micros_to_ns(*e.ts, where + " ts");
    if (e.ph == "X") {
      const Nanos dur = e.dur ? micros_to_ns(*e.dur, where + " dur") : 0;
      raw.push_back({std::move(e.pid), std::move(e.tid), std::move(e.name), std::move(e.cat), ts_ns, std::max<Nanos>(0, dur)});
    } else if (e.ph == "B") {
      open_[{e.pid, e.tid}].push_back({std::move(e.name), ts_ns});
      return;
    } else {
      auto& st = open_[{e.pid, e.tid}];
      if (st.empty()) return;
      raw.push_back({std::move(e.pid), std::move(e.tid), st.back().first, std::move(e.cat), st.back().second,
                     std::max<Nanos>(0, ts_ns - st.back().second)});
      st.pop_back();
    }
    min_ts = std::min(min_ts, ts);
  }

  Event event_;
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<std::string, Nanos>>> open_;  // (pid, tid) -> B stack
};

// An imported-ops file (write_imported_ops): its ops, each field checked.
class OpsFile final : public ItemStream {
 public:
  OpsFile(std::string path, std::vector<ImportedOp>& out) : ItemStream(std::move(path), "ops", false), out_(out) {}

 private:
  std::string missing_items() const override { return "not an imported-ops file (no ops array)"; }
  void root_field(const std::string&, nlohmann::json&) override {}
  void item_begin() override { op_ = ImportedOp{}; }
  void item_field(const std::string& key, nlohmann::json& v) override {
    const std::string where = "op " + std::to_string(index()) + ": '" + key + "'";
    const auto text = [&] {
      if (!v.is_string()) throw std::runtime_error(path() + ": " + where + " must be a string");
      // Names a profiler wrote, printed by trace show: control characters escaped.
      return printable(v.get<std::string>());
    };
    const auto number = [&] {
      if (!v.is_number_integer()) throw std::runtime_error(path() + ": " + where + " must be a whole number");
      return v.get<std::int64_t>();
    };
    if (key == "pid") op_.pid = static_cast<int>(std::clamp<std::int64_t>(number(), INT32_MIN, INT32_MAX));
    else if (key == "thread") op_.thread = text();
    else if (key == "name") op_.name = text();
    else if (key == "category") op_.category = text();
    else if (key == "begin_ns") op_.begin = number();
    else if (key == "end_ns") op_.end = number();
  }
  void item_end() override { out_.push_back(std::move(op_)); }

  std::vector<ImportedOp>& out_;
  ImportedOp op_;
};

std::vector<ImportedOp> import_events(const std::string& path, const ChromeEvents& events, const ImportOptions& o,
                                      const std::vector<ProcessTrace>& traces, Nanos capture_begin, Nanos capture_end) {
  const std::vector<RawEvent>& raw = events.raw;
  if (raw.empty()) throw std::runtime_error(path + ": no complete (X) or begin/end (B/E) events");
  Nanos offset = 0;
  if (events.base_ns > 0) {
    offset = events.base_ns;
  } else if (events.min_ts < kEpochMicros) {
    if (!o.start_ns) {
      throw std::runtime_error(path + ": its timestamps are relative (the first at " + std::to_string(events.min_ts) +
                               " us); give --start-ns, the profile's time 0 on CLOCK_REALTIME");
    }
    offset = checked_start(*o.start_ns, "--start-ns");
  }
  std::map<std::string, int> pids;
  for (const auto& t : traces) pids[std::to_string(t.pid)] = t.pid;
  std::vector<ImportedOp> ops;
  ops.reserve(raw.size());
  for (const RawEvent& r : raw) {
    ImportedOp op;
    if (o.pid) {
      op.pid = *o.pid;
    } else if (const auto it = pids.find(r.pid); it != pids.end()) {
      op.pid = it->second;
    } else {
      throw std::runtime_error(path + ": process \"" + printable(r.pid) + "\" is not one of the capture's; give --pid");
    }
    op.thread = r.tid;
    op.name = r.name;
    op.category = r.cat;
    op.begin = offset + r.ts;
    if (op.begin <= -kMostNs || op.begin >= kMostNs || r.dur >= kMostNs) {
      throw std::runtime_error(path + ": op \"" + printable(r.name) + "\" at " + std::to_string(op.begin) + " ns for " +
                               std::to_string(r.dur) + " ns is out of range");
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
  return naming_file_on_oom(path, [&] {
    ChromeEvents events(path);
    events.read(limits::kMaxChromeTrace);
    return import_events(path, events, o, traces, capture_begin, capture_end);
  });
}

void write_imported_ops(const std::string& dir, const std::string& name, const std::string& source, const std::vector<ImportedOp>& ops) {
  // Written as text, an op at a time: a document of a million ops took 1.5 GB to
  // write a 125 MB file.
  const auto quoted = [](const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  std::string out = R"({"format":"tensorwire-ops","version":1,"source":)" + quoted(source) + R"(,"ops":[)";
  out.reserve(out.size() + ops.size() * 128);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const ImportedOp& op = ops[i];
    if (i > 0) out += ',';
    out += R"({"pid":)" + std::to_string(op.pid) + R"(,"thread":)" + quoted(op.thread) + R"(,"name":)" + quoted(op.name) +
           R"(,"category":)" + quoted(op.category) + R"(,"begin_ns":)" + std::to_string(op.begin) + R"(,"end_ns":)" +
           std::to_string(op.end) + "}";
  }
  out += "]}\n";
  write_file_atomic(capture_dir::ops_file(dir, name), out);
}

std::vector<ImportedOp> read_imported_ops(const std::string& dir) {
  std::vector<ImportedOp> ops;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (capture_dir::is_ops(n)) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) naming_file_on_oom(f.string(), [&] { OpsFile(f.string(), ops).read(limits::kMaxChromeTrace); });
  return ops;
}

}  // namespace tw

#include "tensorwire/controller/result_collector.hpp"

#include "tensorwire/core/json_value.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/records.hpp"
#include "tensorwire/core/run_dir.hpp"

namespace tw {

namespace fs = std::filesystem;

namespace {

// Refused as the upload begins: more than merge_summary, or any reader of a
// summary, would read.
constexpr std::uint64_t kMaxSummaryBytes = limits::kMaxSummaryFile;

std::string raw_path(const std::string& dir, const std::string& name) { return (fs::path(dir) / (name + ".agent")).string(); }

void merge_records(const std::string& raw, const std::string& out, const ClockTrack& clock) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(raw.c_str(), "rb"), &std::fclose);
  if (!in) throw std::runtime_error(raw + ": cannot open: " + std::strerror(errno));
  unsigned char header[binary_file::kHeaderSize];
  const std::size_t n = std::fread(header, 1, sizeof header, in.get());
  const std::string bad = binary_file::check_header(header, n, kRecordsMagic, "records file", kRecordsVersion, sizeof(Record));
  if (!bad.empty()) throw std::runtime_error(raw + ": " + bad);
  const auto to_controller = [&clock](Nanos t) { return clock.to_controller(t); };
  const std::string tmp = out + ".tmp";
  struct RemoveUnlessRenamed {
    const std::string& path;
    bool renamed = false;
    ~RemoveUnlessRenamed() {
      std::error_code ec;
      if (!renamed) fs::remove(path, ec);
    }
  } guard{tmp};
  {
    RecordFile w(tmp);
    std::vector<Record> batch(4096);
    std::uint64_t index = 0;
    for (;;) {
      const std::size_t got = std::fread(batch.data(), 1, batch.size() * sizeof(Record), in.get());
      if (got % sizeof(Record) != 0) throw std::runtime_error(raw + ": truncated record after record " + std::to_string(index + got / sizeof(Record)));
      const std::size_t records = got / sizeof(Record);
      if (records == 0) break;
      for (std::size_t i = 0; i < records; ++i, ++index) {
        const RecordKind k = batch[i].kind();
        if (k < RecordKind::send || k > RecordKind::tcp_info) {
          throw std::runtime_error(raw + ": record " + std::to_string(index) + " is of unknown kind " +
                                   std::to_string(static_cast<int>(k)));
        }
        batch[i].map_times(to_controller);
      }
      w.write(batch.data(), records);
    }
    if (const int e = w.close(); e != 0) throw std::runtime_error("cannot write " + out + ": " + std::strerror(e));
  }
  fs::rename(tmp, out);
  guard.renamed = true;
}

void merge_summary(const std::string& raw, const std::string& out, const ClockTrack& clock, const std::string& host,
                   const std::string& who) {
  // Bounded in size and nesting like every JSON file tensorwire reads.
  nlohmann::json j;
  try {
    j = read_json_file(raw, limits::kMaxSummaryFile);
  } catch (const std::exception& e) {
    throw std::runtime_error(who + ": uploaded a summary that does not read: " + e.what());
  }
  if (!j.is_object()) throw std::runtime_error(who + ": uploaded a summary that is not a JSON object");
  // Times are whole nanoseconds within [0, 2^62), so that the clock's offset adds without overflow.
  const auto to_controller = [&](const nlohmann::json& v) {
    const auto t = json_exact<Nanos>(v);
    if (!t || *t < 0 || *t >= (Nanos{1} << 62)) throw std::runtime_error(who + ": uploaded a summary whose times are not times: " + v.dump());
    return *t > 0 ? clock.to_controller(*t) : *t;
  };
  for (const char* k : {"start_ns", "end_ns"}) {
    if (j.contains(k)) j[k] = to_controller(j[k]);
  }
  if (j.contains("iteration_times_ns")) {
    if (!j["iteration_times_ns"].is_array()) throw std::runtime_error(who + ": uploaded a summary whose iteration times are not a list");
    for (auto& it : j["iteration_times_ns"]) {
      if (!it.is_array() || it.size() != 2) throw std::runtime_error(who + ": uploaded a summary whose iteration times are not [start, end] pairs");
      it[0] = to_controller(it[0]);
      it[1] = to_controller(it[1]);
    }
  }
  j["clock"]["merged_onto"] = "controller";
  j["clock"]["offset_ns"] = clock.empty() ? 0 : clock.points().front().second.offset;
  j["clock"]["bound_ns"] = clock.max_bound();
  j["clock"]["drift_ns"] = clock.drift();
  j["host"] = host;
  write_file_atomic(out, json_text(j, 2) + "\n");
}

}  // namespace

ResultCollector::ResultCollector(std::string out_dir, RankId rank) : out_dir_(std::move(out_dir)), rank_(rank) {}

void ResultCollector::begin(const control::FileBegin& f) {
  if (file_) throw std::runtime_error("a file in the middle of " + name_);
  const bool records = f.name == run_dir::records_name(rank_);
  // Only the two files an agent writes, for its own rank: nothing else lands here.
  if (!records && f.name != run_dir::summary_name(rank_)) {
    throw std::runtime_error("sent a file \"" + f.name + "\" that is not its results");
  }
  if (records && (f.size < binary_file::kHeaderSize || (f.size - binary_file::kHeaderSize) % sizeof(Record) != 0)) {
    throw std::runtime_error("sent " + f.name + " of " + std::to_string(f.size) + " bytes, not a whole number of records");
  }
  if (!records && f.size > kMaxSummaryBytes) throw std::runtime_error("sent a summary of " + std::to_string(f.size) + " bytes");
  name_ = f.name;
  left_ = f.size;
  got_ = 0;
  const std::string path = raw_path(out_dir_, name_);
  file_ = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
  if (!*file_) throw std::runtime_error("cannot create " + path);
  if (left_ == 0) end();
}

void ResultCollector::data(std::string_view bytes) {
  if (!file_) throw std::runtime_error("sent binary data outside a file");
  if (bytes.size() > left_) throw std::runtime_error("sent more of " + name_ + " than announced");
  file_->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!*file_) throw std::runtime_error("cannot write " + name_ + " into " + out_dir_ + ": " + std::strerror(errno));
  left_ -= bytes.size();
  got_ += bytes.size();
  if (left_ == 0) end();
}

void ResultCollector::end() {
  file_->close();
  if (!*file_) throw std::runtime_error("cannot write " + name_ + " into " + out_dir_);
  file_.reset();
  files_.push_back(name_);
}

ResultCollector::~ResultCollector() {
  std::error_code ec;
  if (file_) {
    file_.reset();
    fs::remove(raw_path(out_dir_, name_), ec);
  }
  for (const std::string& name : files_) fs::remove(raw_path(out_dir_, name), ec);
}

void ResultCollector::merge(const ClockTrack& clock, const std::string& host, const std::string& who) const {
  for (const std::string& name : files_) {
    const std::string raw = raw_path(out_dir_, name);
    const std::string out = (fs::path(out_dir_) / name).string();
    if (name == run_dir::records_name(rank_)) {
      try {
        merge_records(raw, out, clock);
      } catch (const std::exception& e) {
        throw std::runtime_error(who + ": uploaded results that do not read: " + e.what());
      }
    } else {
      merge_summary(raw, out, clock, host, who);
    }
    fs::remove(raw);
  }
}

}  // namespace tw

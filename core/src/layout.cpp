#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <filesystem>

#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/util/printable.hpp"

namespace tw {

namespace {
std::string in(const std::string& dir, const std::string& name) { return (std::filesystem::path(dir) / name).string(); }
bool has(const std::string& name, const char* prefix, const char* extension) {
  const std::string p(prefix), e(extension);
  return name.size() > p.size() + e.size() && name.compare(0, p.size(), p) == 0 &&
         name.compare(name.size() - e.size(), e.size(), e) == 0;
}
}  // namespace

namespace capture_dir {

std::string capture_file(const std::string& dir) { return in(dir, kCaptureFile); }
std::string events_file(const std::string& dir, int pid) {
  return in(dir, kTracePrefix + std::to_string(pid) + kEventsExtension);
}
std::string description_file(const std::string& dir, int pid) {
  return in(dir, kTracePrefix + std::to_string(pid) + kDescriptionExtension);
}
std::string wire_file_name(const std::string& interface) {
  std::string s;
  for (char c : interface) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return kWirePrefix + s + kWireExtension;
}
std::string ops_file(const std::string& dir, const std::string& name) { return in(dir, kOpsPrefix + name + ".json"); }
bool is_description(const std::string& file_name) { return has(file_name, kTracePrefix, kDescriptionExtension); }
bool is_ops(const std::string& file_name) { return has(file_name, kOpsPrefix, ".json"); }

}  // namespace capture_dir

namespace run_dir {

std::string records_name(RankId rank) { return "rank-" + std::to_string(rank) + ".twr"; }
std::string summary_name(RankId rank) { return "rank-" + std::to_string(rank) + ".json"; }
std::string records_file(const std::string& dir, RankId rank) { return in(dir, records_name(rank)); }
std::string summary_file(const std::string& dir, RankId rank) { return in(dir, summary_name(rank)); }
std::string profile_file(const std::string& dir) { return in(dir, "profile.yaml"); }
std::string run_file(const std::string& dir) { return in(dir, "run.json"); }
std::string compare_file(const std::string& dir) { return in(dir, "compare.json"); }
std::string logs_dir(const std::string& dir) { return in(dir, "logs"); }
bool is_run_file(const std::string& file_name) {
  return file_name == "run.json" || file_name == "profile.yaml" || file_name == "roster.yaml" || file_name == "compare.json" ||
         has(file_name, "rank-", ".json") || has(file_name, "rank-", ".twr") || file_name.ends_with(".observed.csv");
}

}  // namespace run_dir

namespace {

// Drops the null members of `j` and of the objects in it: the two levels a
// summary has (counters, clock, options). No deeper: a file nested a hundred
// thousand objects deep would take a recursion down with it.
void drop_nulls(nlohmann::json& j, int levels = 2) {
  if (!j.is_object() || levels == 0) return;
  for (auto it = j.begin(); it != j.end();) {
    if (it->is_null()) {
      it = j.erase(it);
    } else {
      drop_nulls(*it, levels - 1);
      ++it;
    }
  }
}

}  // namespace

namespace run_dir {

nlohmann::json read_run(const std::string& dir) {
  const std::string path = run_file(dir);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nlohmann::json();
  nlohmann::json j = read_json_file(path);
  if (!j.is_object()) throw std::runtime_error(path + ": not a run's account: a JSON object expected");
  if (!json_string(j, "error", path).empty()) j["error"] = printable(j["error"].get<std::string>());
  const double k = json_number(j, "time_scale", path, 1);
  if (!(k >= kMinTimeScale && k <= kMaxTimeScale)) {
    throw std::runtime_error(path + ": 'time_scale' must be from " + json_text(nlohmann::json(kMinTimeScale)) + " to " +
                             json_text(nlohmann::json(kMaxTimeScale)) + ", not " + json_text(j["time_scale"]));
  }
  return j;
}

nlohmann::json read_summary(const std::string& dir, RankId rank) {
  const std::string path = summary_file(dir, rank);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw std::runtime_error(path + ": missing: the agent of rank " + std::to_string(rank) + " wrote no summary (is " + dir +
                             " the --out directory of a replay?)");
  }
  nlohmann::json j = read_json_file(path, limits::kMaxSummaryFile);
  if (!j.is_object()) throw std::runtime_error(path + ": not a summary: a JSON object expected");
  // A null is a field left out (the checks below read it so), and is dropped, so
  // that what reads the summary next finds either a value of the checked type or
  // nothing.
  drop_nulls(j);
  const std::uint64_t r = json_count(j, "rank", path, limits::kMaxRanks, rank);
  if (r != rank) throw std::runtime_error(path + ": names rank " + std::to_string(r) + ", but is the file of rank " + std::to_string(rank));
  json_count(j, "iterations", path, limits::kMaxIterations);
  json_bool(j, "finished", path);
  // Printed as they are by every reader: their control characters escaped (a
  // forged error held a newline and escape sequences for the terminal).
  for (const char* key : {"error", "profile", "host"}) {
    if (!json_string(j, key, path).empty()) j[key] = printable(j[key].get<std::string>());
  }
  // An agent that finished has no error: both said, a reader trusted the one it
  // looked at (results check said ok).
  if (json_bool(j, "finished", path) && !json_string(j, "error", path).empty()) {
    throw std::runtime_error(path + ": says the rank finished, and gives an error (" + j["error"].get<std::string>().substr(0, 200) + ")");
  }
  json_count(j, "profile_digest", path, UINT64_MAX);
  json_int(j, "start_ns", path);
  json_int(j, "end_ns", path);
  const auto object = [&](const char* key) -> const nlohmann::json* {
    if (!j.contains(key) || j[key].is_null()) return nullptr;
    if (!j[key].is_object()) throw std::runtime_error(path + ": '" + key + "' must be an object");
    return &j[key];
  };
  if (const auto* c = object("counters")) {
    for (const auto& [k, v] : c->items()) json_count(*c, k, path + ": counters", UINT64_MAX);
  }
  if (const auto* c = object("clock")) {
    json_int(*c, "bound_ns", path + ": clock");
    json_int(*c, "offset_ns", path + ": clock");
    json_int(*c, "realtime_minus_monotonic_ns", path + ": clock");
  }
  if (const auto* o = object("options")) {
    json_bool(*o, "open_loop", path + ": options");
    json_bool(*o, "tx_timestamps", path + ": options");
    json_count(*o, "tx_stamp_every", path + ": options", UINT32_MAX, 1);
    json_count(*o, "tx_sched_flows", path + ": options", UINT32_MAX, 0);
    json_count(*o, "io_threads", path + ": options", UINT32_MAX, 1);
    json_bool(*o, "realtime", path + ": options");
    if (o->contains("pinned_cores") && !(*o)["pinned_cores"].is_array()) throw std::runtime_error(path + ": options: 'pinned_cores' must be a list");
    json_bool(*o, "realtime_applied", path + ": options");
    json_bool(*o, "sched_batch", path + ": options");
    json_bool(*o, "sched_batch_applied", path + ": options");
    // As the options that set them allow: what compare and analyze scale by.
    const double slowdown = json_number(*o, "slowdown", path + ": options", 1);
    if (!(slowdown > 0 && slowdown <= 1000)) {
      throw std::runtime_error(path + ": options: 'slowdown' must be from 0 (excluded) to 1000, not " + json_text((*o)["slowdown"]));
    }
    // The delay as the agent ran it: --delay-us (up to an hour) stretched by the
    // run's time scale (up to 1000).
    for (const char* key : {"spin_ns", "read_gap_ns", "delay_ns"}) {
      const std::int64_t v = json_int(*o, key, path + ": options");
      const std::int64_t most = std::string_view(key) == "delay_ns" ? static_cast<std::int64_t>(limits::kMaxDuration * kMaxTimeScale)
                                                                      : limits::kMaxDuration;
      if (v < 0 || v > most) {
        throw std::runtime_error(path + ": options: '" + key + "' must be from 0 to " + std::to_string(most) + " ns, not " +
                                 std::to_string(v));
      }
    }
  }
  if (j.contains("iteration_times_ns")) {
    const nlohmann::json& its = j["iteration_times_ns"];
    if (!its.is_array() || its.size() > limits::kMaxIterations) {
      throw std::runtime_error(path + ": 'iteration_times_ns' must be a list of at most " + std::to_string(limits::kMaxIterations) +
                               " [start, end] pairs");
    }
    for (std::size_t i = 0; i < its.size(); ++i) {
      const nlohmann::json& x = its[i];
      if (!x.is_array() || x.size() != 2 || !x[0].is_number_integer() || !x[1].is_number_integer()) {
        throw std::runtime_error(path + ": 'iteration_times_ns' entry " + std::to_string(i) + " must be [start, end] in ns");
      }
    }
  }
  // Every agent writes these three; a summary without one was not written by one.
  for (const char* key : {"rank", "iterations", "finished"}) {
    if (!j.contains(key)) throw std::runtime_error(path + ": not a complete summary: '" + key + "' is missing");
  }
  return j;
}

}  // namespace run_dir

}  // namespace tw

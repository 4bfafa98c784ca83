#include "run_summary.hpp"

#include <nlohmann/json.hpp>

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw {

std::string RunSummary::json() const {
  nlohmann::json j;
  j["rank"] = rank;
  j["profile"] = profile;
  j["profile_digest"] = profile_digest;
  j["iterations"] = iterations;
  j["finished"] = finished;
  j["error"] = error;
  j["clock"] = {{"records", "CLOCK_REALTIME"}, {"realtime_minus_monotonic_ns", realtime_minus_monotonic}};
  j["start_ns"] = start;
  j["end_ns"] = end;
  nlohmann::json its = nlohmann::json::array();
  for (const auto& [s, e] : iteration_times) its.push_back({s, e});
  j["iteration_times_ns"] = std::move(its);
  j["counters"] = {{"messages_sent", messages_sent},       {"bytes_sent", bytes_sent},
                   {"messages_received", messages_received}, {"bytes_received", bytes_received},
                   {"records_written", records_written},   {"records_dropped", records_dropped},
                   {"tx_timestamps_lost", tx_timestamps_lost}, {"looks", looks}, {"looks_skipped", looks_skipped}, {"naps", naps},
                   {"max_rss_kib", max_rss_kib}};
  j["options"] = {{"open_loop", open_loop}, {"slowdown", slowdown}, {"spin_ns", spin}, {"read_gap_ns", read_gap}, {"read_nap_ns", read_nap}, {"delay_ns", delay},
                  {"tx_timestamps", tx_timestamps}, {"tx_stamp_every", tx_stamp_every}, {"tx_sched_flows", tx_sched_flows},
                  {"io_threads", io_threads}, {"pinned_cores", pinned_cores}, {"realtime", realtime},
                  {"realtime_applied", realtime_applied}, {"sched_batch", sched_batch},
                  {"sched_batch_applied", sched_batch_applied}, {"congestion_control", congestion_control}};
  return json_text(j, 2) + "\n";
}

void RunSummary::write(const std::string& path) const { write_file_atomic(path, json()); }

}  // namespace tw

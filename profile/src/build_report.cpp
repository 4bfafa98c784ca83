// What `profile build` prints: what it found and what it left out.
#include <fmt/core.h>

#include <algorithm>

#include <map>
#include <nlohmann/json.hpp>

#include "tensorwire/core/text_table.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/profile/build.hpp"

namespace tw {

std::string build_report_text(const BuildReport& r) {
  std::string out;
  TextTable ranks({"rank", "pid", "host", "role", "found from"});
  for (const auto& x : r.ranks) ranks.add({std::to_string(x.rank), std::to_string(x.pid), x.host, x.role, x.how});
  out += ranks.str();
  if (r.clocks.size() > 1) {
    out += "\n";
    TextTable clocks({"host", "clock offset", "uncertainty"});
    for (const auto& c : r.clocks) {
      clocks.add({c.host, human_duration(c.offset), c.uncertainty < 0 ? "one-sided" : "+/- " + human_duration(c.uncertainty)});
    }
    out += clocks.str();
  }
  std::map<std::string, std::pair<std::size_t, Bytes>> uses;
  for (const auto& c : r.connections) {
    auto& u = uses[c.use];
    ++u.first;
    u.second += c.bytes;
  }
  out += "\nconnections (one direction each):";
  for (const auto& [use, u] : uses) out += fmt::format(" {} {} ({})", u.first, use, human_bytes(u.second));
  out += "; only data is replayed\n";
  out += fmt::format("iterations from {}: {} found, {} used ({} to {})\n", r.iteration_source, r.detected, r.used, r.first_used,
                     r.first_used + r.used - 1);
  for (const auto& d : r.dropped) out += "  dropped " + d + "\n";
  out += fmt::format("per iteration: {} messages, {}, {} compute ops ({} summed over ranks)\n", r.messages_per_iteration,
                     human_bytes(r.bytes_per_iteration), r.compute_ops, human_duration(r.compute_per_iteration));
  const double cover = r.sends == 0 ? 0.0 : 100.0 * static_cast<double>(r.sends_with_dependencies) / static_cast<double>(r.sends);
  out += fmt::format("dependencies: {} of {} sends ({:.0f}%) wait for another send or a receipt, the rest for their rank's "
                     "iteration start; wait spread (p90 - p10 over iterations) p50 {}, p90 {}\n",
                     r.sends_with_dependencies, r.sends, cover, human_duration(r.gap_spread_p50), human_duration(r.gap_spread_p90));
  if (!r.read_lags.empty()) {
    out += "read late: the receiver read no sooner than this after arrival (the replay keeps it):";
    const std::size_t shown = std::min<std::size_t>(r.read_lags.size(), 6);
    for (std::size_t i = 0; i < shown; ++i) {
      out += fmt::format("{} {} {}", i == 0 ? "" : ",", r.read_lags[i].first, human_duration(r.read_lags[i].second));
    }
    if (shown < r.read_lags.size()) out += fmt::format(", {} more flows", r.read_lags.size() - shown);
    out += "\n";
  }
  for (const auto& w : r.warnings) out += "warning: " + w + "\n";
  return out;
}

nlohmann::json build_report_json(const BuildReport& r) {
  nlohmann::json j;
  for (const auto& x : r.ranks) j["ranks"].push_back({{"rank", x.rank}, {"pid", x.pid}, {"host", x.host}, {"role", x.role}, {"how", x.how}});
  j["connections"] = nlohmann::json::array();
  for (const auto& c : r.connections) {
    j["connections"].push_back({{"local", c.local}, {"remote", c.remote}, {"pid", c.pid}, {"use", c.use}, {"bytes", c.bytes}, {"messages", c.messages}});
  }
  j["clocks"] = nlohmann::json::array();
  for (const auto& c : r.clocks) j["clocks"].push_back({{"host", c.host}, {"offset_ns", c.offset}, {"uncertainty_ns", c.uncertainty}});
  j["iterations"] = {{"source", r.iteration_source}, {"detected", r.detected}, {"first_used", r.first_used}, {"used", r.used}, {"dropped", r.dropped}};
  j["per_iteration"] = {{"messages", r.messages_per_iteration}, {"bytes", r.bytes_per_iteration}, {"compute_ops", r.compute_ops},
                        {"compute_ns", r.compute_per_iteration}};
  j["dependencies"] = {{"sends", r.sends}, {"with_dependencies", r.sends_with_dependencies},
                       {"wait_spread_p50_ns", r.gap_spread_p50}, {"wait_spread_p90_ns", r.gap_spread_p90}};
  j["read_lags"] = nlohmann::json::array();
  for (const auto& [flow, lag] : r.read_lags) j["read_lags"].push_back({{"flow", flow}, {"read_lag_ns", lag}});
  j["warnings"] = r.warnings;
  return j;
}

}  // namespace tw

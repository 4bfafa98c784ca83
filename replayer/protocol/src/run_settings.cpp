#include "tensorwire/protocol/run_settings.hpp"

#include "tensorwire/util/tcp_congestion.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tensorwire/core/json_value.hpp"

namespace tw {

const char* to_string(TxSched s) {
  switch (s) {
    case TxSched::on: return "on";
    case TxSched::off: return "off";
    case TxSched::automatic: break;
  }
  return "auto";
}

std::optional<TxSched> tx_sched_from(const std::string& s) {
  for (TxSched t : {TxSched::automatic, TxSched::on, TxSched::off}) {
    if (s == to_string(t)) return t;
  }
  return std::nullopt;
}

nlohmann::json to_json(const RunSettings& s) {
  return {{"iterations", s.iterations},       {"open_loop", s.open_loop},
          {"open_loop_offsets_ns", s.open_loop_offsets}, {"open_loop_period_ns", s.open_loop_period}, {"spin_ns", s.spin},
          {"read_gap_ns", s.read_gap},        {"read_nap_ns", s.read_nap},        {"delay_ns", s.delay},              {"tx_timestamps", s.tx_timestamps},
          {"tx_stamp_every", s.tx_stamp_every}, {"tx_sched", to_string(s.tx_sched)},
          {"io_threads", s.io_threads},       {"machine_agents", s.machine_agents}, {"pin", s.pin},                   {"realtime", s.realtime},
          {"sched_batch", s.sched_batch},     {"congestion_control", s.congestion_control},
          {"connect_timeout_ns", s.connect_timeout}, {"idle_timeout_ns", s.idle_timeout}};
}

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) throw std::runtime_error(std::string("settings: missing \"") + name + "\"");
  auto v = json_exact<T>(*it);
  if (!v) throw std::runtime_error(std::string("settings: \"") + name + "\" has the wrong type");
  return std::move(*v);
}

}  // namespace

RunSettings run_settings_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("settings: not an object");
  RunSettings s;
  s.iterations = field<std::uint64_t>(j, "iterations");
  s.open_loop = field<bool>(j, "open_loop");
  s.open_loop_offsets = field<std::vector<Nanos>>(j, "open_loop_offsets_ns");
  s.open_loop_period = field<Nanos>(j, "open_loop_period_ns");
  s.spin = field<Nanos>(j, "spin_ns");
  s.read_gap = field<Nanos>(j, "read_gap_ns");
  // Optional: a controller from before it sends none (no naps).
  if (j.contains("read_nap_ns")) s.read_nap = field<Nanos>(j, "read_nap_ns");
  s.delay = field<Nanos>(j, "delay_ns");
  s.tx_timestamps = field<bool>(j, "tx_timestamps");
  s.tx_stamp_every = field<std::uint32_t>(j, "tx_stamp_every");
  const auto sched = tx_sched_from(field<std::string>(j, "tx_sched"));
  if (!sched) throw std::runtime_error("settings: \"tx_sched\" is not auto, on or off");
  s.tx_sched = *sched;
  s.io_threads = field<std::uint32_t>(j, "io_threads");
  // Optional: 0 when absent (the agent counts its roster).
  if (j.contains("machine_agents")) s.machine_agents = field<std::uint32_t>(j, "machine_agents");
  s.pin = field<bool>(j, "pin");
  s.realtime = field<bool>(j, "realtime");
  // Optional: a controller from before it sends none (normal scheduling).
  if (j.contains("sched_batch")) s.sched_batch = field<bool>(j, "sched_batch");
  if (s.realtime && s.sched_batch) throw std::runtime_error("settings: \"realtime\" and \"sched_batch\" exclude each other");
  // Optional: a controller from before it sends none (each host's default).
  if (j.contains("congestion_control")) s.congestion_control = field<std::string>(j, "congestion_control");
  if (!s.congestion_control.empty()) {
    if (auto bad = congestion_name_problem(s.congestion_control); !bad.empty()) {
      throw std::runtime_error("settings: \"congestion_control\": " + bad);
    }
  }
  s.connect_timeout = field<Nanos>(j, "connect_timeout_ns");
  s.idle_timeout = field<Nanos>(j, "idle_timeout_ns");
  if (s.open_loop && s.open_loop_period <= 0) throw std::runtime_error("settings: open loop without a period");
  if (s.spin < 0 || s.read_gap < 0 || s.read_gap > kMostReadGap || s.read_nap < 0 || s.read_nap > kMostReadNap || s.delay < 0 || s.connect_timeout <= 0 || s.idle_timeout <= 0 || s.tx_stamp_every < 1 ||
      s.io_threads > kMaxIoThreads) {
    throw std::runtime_error("settings: a value is out of range");
  }
  return s;
}

std::uint32_t automatic_io_threads(std::uint64_t flows, std::uint64_t cores, std::uint64_t machine_agents) {
  const std::uint64_t share = cores / std::max<std::uint64_t>(1, machine_agents);
  const std::uint64_t wanted = (flows + kFlowsPerIoThread - 1) / kFlowsPerIoThread;
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(std::min(wanted, share), 1, kMaxIoThreads));
}

ExecutorOptions executor_options_for(const RunSettings& s, double slowdown) {
  ExecutorOptions e;
  e.slowdown = slowdown;
  e.iterations = s.iterations;
  e.open_loop = s.open_loop;
  if (s.open_loop) {
    e.offsets = s.open_loop_offsets;
    e.period = s.open_loop_period;
  }
  return e;
}

}  // namespace tw

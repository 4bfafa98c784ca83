#include "tensorwire/protocol/run_settings.hpp"

#include <stdexcept>
#include <string>

#include "tensorwire/core/json_value.hpp"

namespace tw {

nlohmann::json to_json(const RunSettings& s) {
  return {{"iterations", s.iterations},       {"open_loop", s.open_loop},
          {"open_loop_offsets_ns", s.open_loop_offsets}, {"open_loop_period_ns", s.open_loop_period}, {"spin_ns", s.spin},
          {"delay_ns", s.delay},              {"tx_timestamps", s.tx_timestamps},
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
  s.delay = field<Nanos>(j, "delay_ns");
  s.tx_timestamps = field<bool>(j, "tx_timestamps");
  s.connect_timeout = field<Nanos>(j, "connect_timeout_ns");
  s.idle_timeout = field<Nanos>(j, "idle_timeout_ns");
  if (s.open_loop && s.open_loop_period <= 0) throw std::runtime_error("settings: open loop without a period");
  if (s.spin < 0 || s.delay < 0 || s.connect_timeout <= 0 || s.idle_timeout <= 0) {
    throw std::runtime_error("settings: a value is out of range");
  }
  return s;
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

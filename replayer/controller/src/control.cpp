#include "tensorwire/controller/control.hpp"

#include <sys/random.h>
#include <time.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>


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
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error(std::string("settings: \"") + name + "\" has the wrong type");
  }
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

nlohmann::json parse_control_message(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw std::runtime_error("a control message that is not JSON");
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw std::runtime_error("a control message without a \"type\"");
  }
  return j;
}

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Nanos realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

std::string random_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::pair<std::string, std::uint16_t> split_host_port(const std::string& text, const std::string& what) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw std::invalid_argument(what + ": expected HOST:PORT, got \"" + text + "\"");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  const char* b = text.data() + colon + 1;
  const char* e = text.data() + text.size();
  const auto r = std::from_chars(b, e, port);
  if (r.ec != std::errc() || r.ptr != e || port > 65535) {
    throw std::invalid_argument(what + ": bad port in \"" + text + "\"");
  }
  return {host, static_cast<std::uint16_t>(port)};
}

}  // namespace tw

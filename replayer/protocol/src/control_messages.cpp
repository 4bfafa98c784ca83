#include "tensorwire/protocol/control_messages.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorwire/core/frame.hpp"
#include "tensorwire/core/json_value.hpp"

namespace tw {
namespace {

using nlohmann::json;
using namespace control;

// Why a message does not decode; caught once, in decode().
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads the fields of one message, naming the message and the field in errors.
class Fields {
 public:
  Fields(const json& j, const char* type) : j_(j), type_(type) {}

  template <typename T>
  T get(const char* name) const {
    const auto it = j_.find(name);
    if (it == j_.end()) throw Malformed(prefix() + "whose \"" + name + "\" is missing");
    return as<T>(*it, name);
  }
  template <typename T>
  T get_or(const char* name, T fallback) const {
    const auto it = j_.find(name);
    return it == j_.end() ? fallback : as<T>(*it, name);
  }
  template <typename T>
  std::optional<T> maybe(const char* name) const {
    const auto it = j_.find(name);
    if (it == j_.end()) return std::nullopt;
    return as<T>(*it, name);
  }
  const json& at(const char* name) const {
    const auto it = j_.find(name);
    if (it == j_.end()) throw Malformed(prefix() + "whose \"" + name + "\" is missing");
    return *it;
  }
  // A TCP port: the JSON integer must fit, not wrap.
  std::uint16_t port(const char* name) const {
    const auto v = get<std::uint64_t>(name);
    if (v > 65535) throw Malformed(prefix() + "whose \"" + name + "\" is not a port");
    return static_cast<std::uint16_t>(v);
  }
  [[noreturn]] void bad(const std::string& what) const { throw Malformed(prefix() + "with " + what); }
  // An element of a nested value (an array's, an object's) as T; else bad(what).
  template <typename T>
  T element(const json& v, const std::string& what) const {
    auto x = json_exact<T>(v);
    if (!x) bad(what);
    return std::move(*x);
  }

 private:
  std::string prefix() const { return std::string("a \"") + type_ + "\" "; }
  template <typename T>
  T as(const json& v, const char* name) const {
    auto x = json_exact<T>(v);
    if (!x) throw Malformed(prefix() + "whose \"" + name + "\" has the wrong type");
    return std::move(*x);
  }
  const json& j_;
  const char* type_;
};

// ---- one writer and one reader per message ------------------------------------

void write(json& j, const Hello& m) {
  j["version"] = m.version;
  j["host"] = m.host;
  j["pid"] = m.pid;
  j["data_host"] = m.data_host;
  j["data_port"] = m.data_port;
  if (m.rank_hint) j["rank_hint"] = *m.rank_hint;
}
void read(const Fields& f, Hello& m) {
  m.version = f.get_or<int>("version", 0);
  m.host = f.get_or<std::string>("host", "?");
  m.pid = f.get_or<long>("pid", 0);
  m.data_host = f.get<std::string>("data_host");
  m.data_port = f.port("data_port");
  m.rank_hint = f.maybe<RankId>("rank_hint");
}

void write(json&, const Connected&) {}
void read(const Fields&, Connected&) {}

void write(json& j, const Pong& m) {
  j["seq"] = m.seq;
  j["t"] = m.t;
}
void read(const Fields& f, Pong& m) {
  m.seq = f.get_or<std::uint64_t>("seq", 0);
  m.t = f.get<Nanos>("t");
}

void write(json& j, const Progress& m) {
  json its = json::array();
  for (const auto& i : m.iterations) its.push_back({i.index, i.start, i.end});
  json fl = json::array();
  for (const auto& b : m.flows) fl.push_back({b.flow, b.bytes});
  j["iterations"] = std::move(its);
  j["flows"] = std::move(fl);
}
// A list of pairs, e.g. [[first, count], ...].
template <typename A, typename B>
std::vector<std::pair<A, B>> read_pairs(const Fields& f, const char* key, const char* what) {
  const std::string bad = std::string("\"") + key + "\" that are not [[" + what + "], ...]";
  const json& list = f.at(key);
  if (!list.is_array()) f.bad(bad);
  std::vector<std::pair<A, B>> out;
  out.reserve(list.size());
  for (const auto& e : list) {
    if (!e.is_array() || e.size() != 2) f.bad(bad);
    out.emplace_back(f.element<A>(e[0], bad), f.element<B>(e[1], bad));
  }
  return out;
}

void read(const Fields& f, Progress& m) {
  const std::string its = "\"iterations\" that are not [[index, start, end], ...]";
  const json& iterations = f.at("iterations");
  if (!iterations.is_array()) f.bad(its);
  for (const auto& it : iterations) {
    if (!it.is_array() || it.size() != 3) f.bad(its);
    m.iterations.push_back({f.element<std::uint64_t>(it[0], its), f.element<Nanos>(it[1], its), f.element<Nanos>(it[2], its)});
  }
  for (const auto& [flow, bytes] : read_pairs<std::size_t, std::uint64_t>(f, "flows", "flow, bytes")) m.flows.push_back({flow, bytes});
}

void write(json& j, const Done& m) {
  j["ok"] = m.ok;
  if (!m.error.empty()) j["error"] = m.error;
}
void read(const Fields& f, Done& m) {
  m.ok = f.get_or<bool>("ok", false);
  m.error = f.get_or<std::string>("error", "");
}

void write(json& j, const FileBegin& m) {
  j["name"] = m.name;
  j["size"] = m.size;
}
void read(const Fields& f, FileBegin& m) {
  m.name = f.get<std::string>("name");
  m.size = f.get<std::uint64_t>("size");
}

void write(json&, const Uploaded&) {}
void read(const Fields&, Uploaded&) {}

json runs_json(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& runs) {
  json out = json::array();
  for (const auto& [first, count] : runs) out.push_back({first, count});
  return out;
}
void write(json& j, const Setup& m) {
  json roster = json::array();
  for (const auto& e : m.roster) roster.push_back({{"rank", e.rank}, {"host", e.host}, {"port", e.port}});
  j["run"] = m.run;
  j["rank"] = m.rank;
  j["profile"] = m.profile;
  j["ops"] = runs_json(m.ops);
  j["profile_ops"] = m.profile_ops;
  j["flows"] = runs_json(m.flows);
  j["profile_flows"] = m.profile_flows;
  j["profile_digest"] = m.profile_digest;
  j["roster"] = std::move(roster);
  j["settings"] = to_json(m.settings);
  j["slowdown"] = m.slowdown;
  json delays = json::array();
  for (const auto& [src, ns] : m.delay_from) delays.push_back({src, ns});
  j["delay_from_ns"] = std::move(delays);
  j["data_token"] = m.data_token;
}
void read(const Fields& f, Setup& m) {
  m.run = f.get<std::string>("run");
  m.rank = f.get<RankId>("rank");
  m.profile = f.get<std::string>("profile");
  m.ops = read_pairs<std::uint64_t, std::uint64_t>(f, "ops", "first, count");
  m.profile_ops = f.get<std::uint64_t>("profile_ops");
  m.flows = read_pairs<std::uint64_t, std::uint64_t>(f, "flows", "first, count");
  m.profile_flows = f.get<std::uint64_t>("profile_flows");
  m.profile_digest = f.get<std::uint64_t>("profile_digest");
  const std::string rs = "a \"roster\" that is not [{rank, host, port}, ...]";
  const json& roster = f.at("roster");
  if (!roster.is_array()) f.bad(rs);
  for (const auto& e : roster) {
    if (!e.is_object() || !e.contains("port") || !e.contains("rank") || !e.contains("host")) f.bad(rs);
    const auto port = f.element<std::uint64_t>(e["port"], rs);
    if (port > 65535) f.bad("a \"roster\" port out of range");
    m.roster.push_back({f.element<std::uint32_t>(e["rank"], rs), f.element<std::string>(e["host"], rs), static_cast<std::uint16_t>(port)});
  }
  try {
    m.settings = run_settings_from_json(f.at("settings"));
  } catch (const Malformed&) {
    throw;
  } catch (const std::runtime_error& e) {
    f.bad(std::string("bad ") + e.what());
  }
  m.slowdown = f.get_or<double>("slowdown", 1.0);
  m.delay_from = read_pairs<RankId, Nanos>(f, "delay_from_ns", "source rank, ns");
  m.data_token = f.get<std::string>("data_token");
  if (m.data_token.size() > frame::kMaxTokenSize) f.bad("a \"data_token\" longer than " + std::to_string(frame::kMaxTokenSize) + " bytes");
}

void write(json& j, const Ping& m) { j["seq"] = m.seq; }
void read(const Fields& f, Ping& m) { m.seq = f.get_or<std::uint64_t>("seq", 0); }

void write(json& j, const Start& m) { j["at"] = m.at; }
void read(const Fields& f, Start& m) { m.at = f.get<Nanos>("at"); }

void write(json& j, const Stop& m) { j["reason"] = m.reason; }
void read(const Fields& f, Stop& m) { m.reason = f.get_or<std::string>("reason", "no reason given"); }

void write(json&, const Bye&) {}
void read(const Fields&, Bye&) {}

// ---- the one dispatch on "type" ---------------------------------------------------

template <typename Variant>
std::string encode_variant(const Variant& v) {
  return std::visit(
      [](const auto& m) {
        json j = {{"type", m.kType}};
        write(j, m);
        return j.dump();
      },
      v);
}

// Tries each alternative of the variant in turn; the one whose kType matches decodes.
template <typename Variant, std::size_t I = 0>
bool decode_as(const std::string& type, const json& j, std::optional<Variant>& out) {
  if constexpr (I == std::variant_size_v<Variant>) {
    return false;
  } else {
    using T = std::variant_alternative_t<I, Variant>;
    if (type != T::kType) return decode_as<Variant, I + 1>(type, j, out);
    T m;
    read(Fields(j, T::kType), m);
    out = std::move(m);
    return true;
  }
}

template <typename Variant>
Decoded<Variant> decode_variant(std::string_view text) {
  Decoded<Variant> d;
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) {
    d.error = "a control message that is not JSON";
    return d;
  }
  const auto type = j.is_object() ? j.find("type") : j.end();
  if (!j.is_object() || type == j.end() || !type->is_string()) {
    d.error = "a control message without a \"type\"";
    return d;
  }
  const std::string name = type->get<std::string>();
  try {
    if (!decode_as<Variant>(name, j, d.message)) d.error = "an unknown message \"" + name + "\"";
  } catch (const Malformed& e) {
    d.error = e.what();
  }
  return d;
}

}  // namespace

bool control::Setup::operator==(const Setup& o) const {
  return run == o.run && rank == o.rank && profile == o.profile && ops == o.ops && profile_ops == o.profile_ops &&
         flows == o.flows && profile_flows == o.profile_flows &&
         profile_digest == o.profile_digest && roster.size() == o.roster.size() &&
         std::equal(roster.begin(), roster.end(), o.roster.begin(),
                    [](const RosterEntry& a, const RosterEntry& b) { return a.rank == b.rank && a.host == b.host && a.port == b.port; }) &&
         to_json(settings) == to_json(o.settings) && slowdown == o.slowdown && delay_from == o.delay_from && data_token == o.data_token;
}

std::string encode(const AgentMessage& m) { return encode_variant(m); }
std::string encode(const ControllerMessage& m) { return encode_variant(m); }
Decoded<AgentMessage> decode_agent_message(std::string_view text) { return decode_variant<AgentMessage>(text); }
Decoded<ControllerMessage> decode_controller_message(std::string_view text) { return decode_variant<ControllerMessage>(text); }

}  // namespace tw

// The pure half of the testbed: specs, parsing, and the ip/tc commands.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/launch/testbed.hpp"

namespace tw {

std::optional<std::uint64_t> parse_rate(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + i, v);
  if (r.ec != std::errc() || r.ptr != text.data() + i || !(v > 0)) return std::nullopt;
  std::string unit = text.substr(i);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double mult = 0;
  if (unit == "bit") mult = 1;
  else if (unit == "kbit") mult = 1e3;
  else if (unit == "mbit") mult = 1e6;
  else if (unit == "gbit") mult = 1e9;
  else return std::nullopt;
  const double bps = v * mult;
  if (bps < 8000 || bps > 400e9) return std::nullopt;  // 8 kbit/s .. 400 Gbit/s
  return static_cast<std::uint64_t>(std::llround(bps));
}

std::string format_rate(std::uint64_t bps) {
  if (bps % 1'000'000'000 == 0) return std::to_string(bps / 1'000'000'000) + "gbit";
  if (bps % 1'000'000 == 0) return std::to_string(bps / 1'000'000) + "mbit";
  if (bps % 1000 == 0) return std::to_string(bps / 1000) + "kbit";
  return std::to_string(bps) + "bit";
}

std::string TestbedSpec::subnet_prefix() const {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return "10.213." + std::to_string(1 + h % 250) + ".";
}

Nanos TestbedSpec::delay(std::uint32_t a, std::uint32_t b) const {
  Nanos d = 0;
  for (const PairShape& p : pairs) {
    if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) d = p.delay;
  }
  return d;
}

void check_testbed_name(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 8 &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '-'; });
  if (!ok) throw std::invalid_argument("--name '" + name + "': up to 8 letters, digits or '-'");
}

PairShape parse_pair(const std::string& text, std::uint32_t hosts) {
  const auto bad = [&text](const std::string& why) {
    return std::invalid_argument("--pair '" + text + "': " + why + " (expected like 1-3:rate=300mbit,delay=5ms)");
  };
  const auto colon = text.find(':');
  const auto dash = text.find('-');
  if (colon == std::string::npos || dash == std::string::npos || dash > colon) throw bad("no HOST-HOST:");
  PairShape p;
  const auto num = [&](std::size_t b, std::size_t e, std::uint32_t& out) {
    const auto r = std::from_chars(text.data() + b, text.data() + e, out);
    if (r.ec != std::errc() || r.ptr != text.data() + e || b == e) throw bad("hosts are numbers");
  };
  num(0, dash, p.a);
  num(dash + 1, colon, p.b);
  if (p.a >= hosts || p.b >= hosts) throw bad("the testbed has hosts 0 to " + std::to_string(hosts - 1));
  if (p.a == p.b) throw bad("a pair is two different hosts");
  std::size_t at = colon + 1;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string kv = text.substr(at, end - at);
    at = end + 1;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw bad("'" + kv + "' is not KEY=VALUE");
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "rate") {
      const auto r = parse_rate(value);
      if (!r) throw bad("rate '" + value + "' is not like 300mbit");
      p.rate = *r;
    } else if (key == "delay") {
      const auto d = parse_duration(value);
      if (!d || *d < 0 || *d > 10 * kSecond) throw bad("delay '" + value + "' is not like 5ms");
      p.delay = *d;
    } else {
      throw bad("unknown key '" + key + "' (rate, delay)");
    }
  }
  if (p.rate == 0 && p.delay == 0) throw bad("give a rate or a delay");
  return p;
}

TestbedSpec make_testbed_spec(const std::string& name, std::uint32_t hosts, const std::string& rate,
                              const std::vector<std::string>& pairs) {
  TestbedSpec s;
  s.name = name;
  check_testbed_name(s.name);
  s.hosts = hosts;
  if (!rate.empty()) {
    const auto r = parse_rate(rate);
    if (!r) throw std::invalid_argument("--rate '" + rate + "': expected a rate like 10gbit or 300mbit");
    s.rate = *r;
  }
  for (const auto& x : pairs) s.pairs.push_back(parse_pair(x, s.hosts));
  return s;
}

namespace {

using Commands = std::vector<std::vector<std::string>>;

// htb and tbf need a burst of a few milliseconds' worth at high rates.
std::string burst(std::uint64_t bps) { return std::to_string(std::max<std::uint64_t>(32 * 1024, bps / 8 / 250)); }

}  // namespace

Commands testbed_up_commands(const TestbedSpec& s) {
  Commands c;
  const std::string br = s.bridge();
  c.push_back({"ip", "link", "add", br, "type", "bridge"});
  c.push_back({"ip", "addr", "add", s.bridge_address() + "/24", "dev", br});
  c.push_back({"ip", "link", "set", br, "up"});
  for (std::uint32_t h = 0; h < s.hosts; ++h) {
    const std::string ns = s.ns(h), v = s.root_veth(h);
    c.push_back({"ip", "netns", "add", ns});
    c.push_back({"ip", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns});
    c.push_back({"ip", "link", "set", v, "master", br});
    c.push_back({"ip", "link", "set", v, "up"});
    c.push_back({"ip", "-n", ns, "addr", "add", s.address(h) + "/24", "dev", "eth0"});
    c.push_back({"ip", "-n", ns, "link", "set", "eth0", "up"});
    c.push_back({"ip", "-n", ns, "link", "set", "lo", "up"});
  }
  return c;
}

Commands testbed_shaping_commands(const TestbedSpec& s) {
  Commands c;
  for (std::uint32_t h = 0; h < s.hosts; ++h) {
    const std::string ns = s.ns(h), v = s.root_veth(h);
    // Start from nothing; the deletes fail harmlessly when there is nothing to delete.
    c.push_back({"-", "tc", "-n", ns, "qdisc", "del", "dev", "eth0", "root"});
    c.push_back({"-", "tc", "qdisc", "del", "dev", v, "root"});
    std::vector<const PairShape*> mine;
    for (const PairShape& p : s.pairs) {
      if (p.rate > 0 && (p.a == h || p.b == h)) mine.push_back(&p);
    }
    if (s.rate > 0) {
      // The host's link towards the switch (its receiving side), as a token bucket.
      c.push_back({"tc", "qdisc", "add", "dev", v, "root", "tbf", "rate", format_rate(s.rate), "burst", burst(s.rate), "latency", "100ms"});
    }
    if (s.rate == 0 && mine.empty()) continue;
    // Its sending side: htb, one class for the host's rate and one per shaped pair.
    const std::uint64_t top = s.rate > 0 ? s.rate : 100'000'000'000ULL;
    c.push_back({"tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"});
    c.push_back({"tc", "-n", ns, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", format_rate(top),
                 "burst", burst(top), "cburst", burst(top)});
    for (const PairShape* p : mine) {
      const std::uint32_t peer = p->a == h ? p->b : p->a;
      const std::uint64_t rate = std::min(p->rate, top);
      const std::string cls = "1:" + std::to_string(100 + peer);
      c.push_back({"tc", "-n", ns, "class", "add", "dev", "eth0", "parent", "1:", "classid", cls, "htb", "rate", format_rate(rate),
                   "ceil", format_rate(rate), "burst", burst(rate), "cburst", burst(rate)});
      c.push_back({"tc", "-n", ns, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
                   "ip", "dst", s.address(peer) + "/32", "flowid", cls});
    }
  }
  return c;
}

std::string testbed_spec_json(const TestbedSpec& s) {
  nlohmann::json j = {{"name", s.name}, {"hosts", s.hosts}, {"rate_bps", s.rate}};
  nlohmann::json pairs = nlohmann::json::array();
  for (const PairShape& p : s.pairs) pairs.push_back({{"a", p.a}, {"b", p.b}, {"rate_bps", p.rate}, {"delay_ns", p.delay}});
  j["pairs"] = std::move(pairs);
  return json_text(j, 2) + "\n";
}

TestbedSpec testbed_spec_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  try {
    if (j.is_discarded()) throw std::runtime_error("not JSON");
    TestbedSpec s;
    s.name = j.at("name").get<std::string>();
    s.hosts = j.at("hosts").get<std::uint32_t>();
    s.rate = j.at("rate_bps").get<std::uint64_t>();
    for (const auto& p : j.at("pairs")) {
      s.pairs.push_back({p.at("a").get<std::uint32_t>(), p.at("b").get<std::uint32_t>(), p.at("rate_bps").get<std::uint64_t>(),
                         p.at("delay_ns").get<Nanos>()});
    }
    return s;
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("testbed state: ") + e.what());
  }
}

}  // namespace tw

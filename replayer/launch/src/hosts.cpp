#include "tensorwire/launch/hosts.hpp"

#include <charconv>
#include <stdexcept>

namespace tw {

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string entry = text.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) throw std::invalid_argument("--hosts: an empty entry in \"" + text + "\"");
    HostSlots h;
    h.target = entry;
    const auto colon = entry.rfind(':');
    if (colon != std::string::npos && entry.find(']') == std::string::npos) {
      unsigned slots = 0;
      const char* b = entry.data() + colon + 1;
      const char* e = entry.data() + entry.size();
      const auto r = std::from_chars(b, e, slots);
      if (r.ec != std::errc() || r.ptr != e || slots == 0 || slots > 4096) {
        throw std::invalid_argument("--hosts: \"" + entry + "\": slots must be a number from 1 to 4096");
      }
      h.slots = slots;
      h.target = entry.substr(0, colon);
    }
    const auto atsign = h.target.find('@');
    h.host = atsign == std::string::npos ? h.target : h.target.substr(atsign + 1);
    if (h.host.empty() || h.target.front() == '-') throw std::invalid_argument("--hosts: \"" + entry + "\" names no host");
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<std::size_t> place_ranks(const std::vector<HostSlots>& hosts, std::size_t ranks) {
  std::vector<std::size_t> place;
  for (std::size_t h = 0; h < hosts.size() && place.size() < ranks; ++h) {
    for (std::uint32_t k = 0; k < hosts[h].slots && place.size() < ranks; ++k) place.push_back(h);
  }
  if (place.size() < ranks) {
    std::size_t slots = 0;
    for (const auto& h : hosts) slots += h.slots;
    throw std::invalid_argument("--hosts: " + std::to_string(slots) + " slot(s) for " + std::to_string(ranks) +
                                " ranks; give more hosts or HOST:SLOTS");
  }
  return place;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace tw

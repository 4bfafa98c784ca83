#include "tensorwire/util/host_port.hpp"

#include <charconv>
#include <stdexcept>

namespace tw {

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

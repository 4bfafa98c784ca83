#include "tensorwire/util/tcp_congestion.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "tensorwire/util/unique_fd.hpp"

namespace tw {

namespace {

// The algorithms this host has loaded, as the kernel lists them; empty when it
// cannot say.
std::string available() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string congestion_name_problem(const std::string& name) {
  if (name.empty() || name.size() > kMostCongestionName) {
    return "a congestion control's name is 1 to " + std::to_string(kMostCongestionName) + " characters";
  }
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return "a congestion control's name is letters, digits, '_' and '-'";
  }
  return {};
}

std::optional<std::string> congestion_control(int fd) {
  char name[kMostCongestionName + 1] = {};
  socklen_t len = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return std::nullopt;
  return std::string(name, ::strnlen(name, std::min<std::size_t>(len, sizeof name)));
}

std::string set_congestion_control(int fd, const std::string& name) {
  if (auto bad = congestion_name_problem(name); !bad.empty()) return bad;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return {};
  const int e = errno;
  const std::string have = available();
  if (e == ENOENT) return "'" + name + "' is not available on this host" + (have.empty() ? "" : " (it has: " + have + ")");
  if (e == EPERM) {
    return "'" + name + "' is not allowed here without CAP_NET_ADMIN (net.ipv4.tcp_allowed_congestion_control)";
  }
  return "'" + name + "': " + std::strerror(e);
}

std::string probe_congestion_control(const std::string& name) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw std::runtime_error(std::string("--congestion-control: no TCP socket to try it on: ") + std::strerror(errno));
  if (!name.empty()) {
    if (auto why = set_congestion_control(fd.get(), name); !why.empty()) throw std::runtime_error("--congestion-control: " + why);
  }
  return congestion_control(fd.get()).value_or("");
}

bool paces(const std::string& name) { return name.rfind("bbr", 0) == 0; }

}  // namespace tw

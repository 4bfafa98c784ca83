#include "tensorwire/util/self_exe.hpp"

#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace tw {

std::string self_exe() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot find the tensorwire binary (/proc/self/exe)");
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

}  // namespace tw

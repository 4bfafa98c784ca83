#include "tensorwire/util/temp_dir.hpp"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "tensorwire/util/system_call.hpp"

namespace tw {

TempDir::TempDir(const std::string& prefix, const std::string& parent) {
  std::string dir = parent;
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    dir = t != nullptr && *t != '\0' ? t : "/tmp";
  }
  std::string tmpl = (std::filesystem::path(dir) / (prefix + "-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) system_call("mkdtemp " + tmpl, -1);
  path_ = buf.data();
}

TempDir::~TempDir() { remove(); }

TempDir::TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, std::string())) {}

TempDir& TempDir::operator=(TempDir&& o) noexcept {
  if (this != &o) {
    remove();
    path_ = std::exchange(o.path_, std::string());
  }
  return *this;
}

std::string TempDir::release() { return std::exchange(path_, std::string()); }

void TempDir::remove() noexcept {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) std::fprintf(stderr, "tensorwire: cannot remove %s: %s\n", path_.c_str(), ec.message().c_str());
  path_.clear();
}

}  // namespace tw

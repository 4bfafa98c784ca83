#include "tensorwire/util/temp_dir.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "tensorwire/util/system_call.hpp"

namespace tw {

std::string temp_parent() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

// A zombie counts: a killed run's agents are zombies until init collects them.
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;  // EPERM: alive, not ours to probe
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto paren = stat.rfind(')');  // the command name may hold anything
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

std::size_t remove_stale_temp_dirs(const std::string& parent, const std::string& prefix) {
  std::size_t removed = 0;
  std::error_code ec;
  const std::string head = prefix + "-";
  for (auto it = std::filesystem::directory_iterator(parent, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(head)) continue;
    const std::string rest = name.substr(head.size());
    const auto dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 10) continue;
    long pid = 0;
    bool digits = true;
    for (std::size_t i = 0; i < dash; ++i) {
      if (rest[i] < '0' || rest[i] > '9') digits = false;
      else pid = pid * 10 + (rest[i] - '0');
    }
    struct stat st {};
    if (!digits || pid <= 0 || pid > 0x7fffffffL || ::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::geteuid()) {
      continue;
    }
    if (!process_gone(static_cast<pid_t>(pid))) continue;
    std::error_code rec;
    std::filesystem::remove_all(it->path(), rec);
    if (!rec) ++removed;
  }
  return removed;
}

TempDir::TempDir(const std::string& prefix, const std::string& parent) {
  const std::string dir = parent.empty() ? temp_parent() : parent;
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

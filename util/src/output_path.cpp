#include "tensorwire/util/output_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>

namespace tw {

namespace fs = std::filesystem;

namespace {

// The files the readers take from a run directory (docs/results-format.md) or a
// capture directory (docs/trace-format.md): run.json, profile.yaml, roster.yaml,
// compare.json, rank-R.json and .twr, a profile's .observed.csv; capture.json,
// capture-*.json, trace-*.twt and .json, wire-*.pcap, ops-*.json. Anything else
// there (a report, an analysis written beside the run) may be written again.
bool data_file(const fs::path& p) {
  const std::string name = p.filename().string();
  const auto has = [&name](std::string_view prefix, std::string_view suffix) {
    return name.size() >= prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix);
  };
  static constexpr std::array<std::string_view, 5> kNames = {"run.json", "profile.yaml", "roster.yaml", "compare.json", "capture.json"};
  for (const auto n : kNames) {
    if (name == n) return true;
  }
  return has("rank-", ".json") || has("rank-", ".twr") || name.ends_with(".observed.csv") || has("capture-", ".json") ||
         has("trace-", ".twt") || has("trace-", ".json") || has("wire-", ".pcap") || has("ops-", ".json");
}

}  // namespace

void check_output_path(const std::string& out, const std::vector<std::string>& inputs) {
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (ec || !fs::exists(st)) return;  // a new file: nothing of the inputs' can be in the way
  if (fs::is_directory(st)) throw std::runtime_error(out + ": is a directory (the output is a file)");
  for (const std::string& in : inputs) {
    if (fs::equivalent(out, in, ec) && !ec) throw std::runtime_error(out + ": is one of the inputs (" + in + "); write elsewhere");
    ec.clear();
    if (!fs::is_directory(in, ec) || ec || !data_file(out)) continue;
    const fs::path dir = fs::canonical(in, ec);
    const fs::path parent = fs::canonical(fs::absolute(out).parent_path(), ec);
    if (!ec && parent == dir) {
      throw std::runtime_error(out + ": would overwrite a file of the input " + in + "; write elsewhere");
    }
  }
}

bool written_in_place(const std::string& path) {
  // A symlink too (/dev/stdout, a link to the real file): renaming over it would
  // replace the link, not write where it leads.
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  if (S_ISLNK(st.st_mode)) return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
  return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

void write_in_place(const std::string& path, std::string_view text) {
  // O_TRUNC: a regular file reached through a symlink is written whole (a device
  // or a FIFO ignores it).
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      ::close(fd);
      throw std::runtime_error(path + ": cannot write: " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && errno != EINTR) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
}

}  // namespace tw

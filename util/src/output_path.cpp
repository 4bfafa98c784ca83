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

// The files the readers take from a run or a capture directory.
bool data_file(const fs::path& p) {
  static constexpr std::array<std::string_view, 7> kExtensions = {".json", ".twr", ".twt", ".pcap", ".pcapng", ".yaml", ".yml"};
  const std::string ext = p.extension().string();
  for (const auto e : kExtensions) {
    if (ext == e) return true;
  }
  return false;
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
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

void write_in_place(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
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

#include "tensorwire/util/output_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace tw {

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

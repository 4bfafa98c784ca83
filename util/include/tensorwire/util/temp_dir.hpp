// A fresh private directory that removes itself, with everything in it, when it
// goes out of scope. Move-only.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace tw {

class TempDir {
 public:
  // Creates PARENT/PREFIX-XXXXXX with mode 0700 (parent: $TMPDIR or /tmp); throws
  // std::system_error naming the path when it cannot.
  explicit TempDir(const std::string& prefix = "tensorwire", const std::string& parent = "");
  ~TempDir();
  TempDir(TempDir&& o) noexcept;
  TempDir& operator=(TempDir&& o) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Keeps the directory: it is no longer removed.
  std::string release();

 private:
  void remove() noexcept;
  std::string path_;
};

// Directories named PARENT/PREFIX-PID-* (as a process that may be killed names
// its own: PREFIX-<its pid>-XXXXXX) that belong to this user and whose process is
// gone: a killed process cannot remove its own. Removes them; returns how many.
std::size_t remove_stale_temp_dirs(const std::string& parent, const std::string& prefix);

// Whether process `pid` is gone: no such process, or dead and not yet reaped (a
// zombie). A process of another user that lives is not gone.
bool process_gone(pid_t pid);

// $TMPDIR, else /tmp.
std::string temp_parent();

}  // namespace tw

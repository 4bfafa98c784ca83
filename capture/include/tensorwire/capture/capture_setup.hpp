// What a capture of a job needs before the job starts: the options of `tensorwire
// capture`, the interfaces the wire tap listens on, where the shim and python/
// are, and the job's environment. Pure apart from looking for files; any thread.
#pragma once

#include <string>
#include <vector>

namespace tw {

struct CaptureOptions {
  std::string out;            // the capture directory (made if missing)
  std::string wire = "auto";  // --wire: auto, off, or IFACE,IFACE...
  std::vector<std::string> command;
};

// The interfaces --wire names: "any" for auto (every interface, loopback
// included), none for off. Throws std::invalid_argument on a list without a name.
std::vector<std::string> tap_interfaces(const std::string& wire);

// The shim (libtensorwire_capture.so) next to a binary in `exe_dir`: in the build
// tree or the install. Throws std::runtime_error saying to set TW_CAPTURE_LIB.
std::string find_capture_shim(const std::string& exe_dir);
// python/ (the annotation module) in the source tree or the install; empty if none.
std::string find_python_dir(const std::string& exe_dir);

// The variables the job gets: the shim preloaded before any earlier preload, the
// capture directory, and python/ (when there is one) first on PYTHONPATH.
// old_*: the values this process has (may be null).
std::vector<std::string> capture_environment(const std::string& shim, const std::string& dir, const std::string& python_dir,
                                             const char* old_preload, const char* old_pythonpath);

// The exit code that passes a job's wait status on: its own, or 128 + its signal.
int exit_code_of(int wait_status);

}  // namespace tw

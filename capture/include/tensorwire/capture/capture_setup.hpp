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
  bool append = false;        // --append: add to a directory that already holds a capture
  bool samples = true;        // --no-samples: no sample events (TW_CAPTURE_SAMPLES=0)
  std::vector<std::string> command;
};

// The interfaces --wire names: "any" for auto (every interface, loopback
// included), none for off. Throws std::invalid_argument on a list without a name.
std::vector<std::string> tap_interfaces(const std::string& wire);

// The shim (libtensorwire_capture.so) next to a binary in `exe_dir`: in the build
// tree or the install. Throws std::runtime_error saying to set TW_CAPTURE_LIB.
std::string find_capture_shim(const std::string& exe_dir);
// python/ (the annotation module): in the source tree holding the build, in the
// install (PREFIX/lib/tensorwire/python), or beside the binary's directory (the
// build copies python/ to BUILD/python, so an out-of-tree build has it); empty if none.
std::string find_python_dir(const std::string& exe_dir);

// The variables the job gets: the shim preloaded before any earlier preload, the
// capture directory, python/ (when there is one) first on PYTHONPATH, and
// TW_CAPTURE_SAMPLES=0 without samples. old_*: the values this process has (may be null).
std::vector<std::string> capture_environment(const std::string& shim, const std::string& dir, const std::string& python_dir,
                                             const char* old_preload, const char* old_pythonpath, bool samples = true);

// The first file in `dir` that a capture wrote (a trace, a session or wire file),
// or "" when there is none (or no `dir`): a new capture goes there only with --append.
std::string existing_capture_file(const std::string& dir);

// The exit code that passes a job's wait status on: its own, or 128 + its signal.
int exit_code_of(int wait_status);

}  // namespace tw

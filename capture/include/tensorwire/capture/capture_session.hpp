// `tensorwire capture -- CMD`: one capture of a job. The job runs with the shim
// preloaded (every TCP socket call traced, in its children too) and the wire tap
// on its interfaces; DIR/capture-HOST-PID.json says what ran, how it ended and
// what the tap saw (while it runs: that it runs). Several captures may share DIR
// (--append): each has its own session and wire files. The job's life is its own: Ctrl-C reaches it from the
// terminal, and whatever goes wrong with the capture after it ran is reported,
// never turned into the job's failure. The thread that makes a session runs it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensorwire/capture/capture_setup.hpp"

namespace tw {

class CaptureSession {
 public:
  // Checks the options, makes the directory and finds the shim (TW_CAPTURE_LIB, or
  // next to this binary) and python/ (TW_PYTHON_DIR, or next to it). Throws
  // std::invalid_argument on bad options, std::runtime_error when the shim is
  // missing, the directory cannot be made, or it holds a capture already and
  // options.append is not set.
  explicit CaptureSession(CaptureOptions options);

  // Starts the tap (on auto, the job runs without it when it cannot start; asked
  // for by name, its failure throws std::runtime_error before the job starts),
  // runs the job to its end, stops the tap and writes the session file. Throws
  // std::runtime_error when the job cannot be started; problems after the job ran
  // are printed on stderr. Returns the job's wait status. Call it once.
  int run();

  // One line on what was captured, read back from the directory (after run()).
  std::string summary() const;

  const std::string& dir() const { return dir_; }

 private:
  CaptureOptions o_;
  std::vector<std::string> interfaces_;
  std::string dir_, shim_, python_dir_, session_file_, host_;
  int status_ = 0;
  nlohmann::json wire_;
};

}  // namespace tw

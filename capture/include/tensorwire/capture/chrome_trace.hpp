// Chrome-trace JSON (the format of PyTorch's profiler, TensorFlow's profiler and
// Horovod's timeline) in: compute ops imported onto a capture's time line (the
// view/ library draws captures for Perfetto).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorwire/core/trace.hpp"

namespace tw {

struct ImportedOp {
  int pid = 0;  // the capture's process it belongs to
  std::string thread, name, category;
  Nanos begin = 0, end = 0;  // CLOCK_REALTIME
};

struct ImportOptions {
  std::optional<int> pid;          // every op to this process (profilers name their own pids)
  std::optional<Nanos> start_ns;   // CLOCK_REALTIME of the profile's time 0, for relative timestamps
};

// Reads complete ("X") and begin/end ("B"/"E") events. Timestamps in microseconds
// since the epoch are taken as they are (checked against the capture's span);
// relative ones need `start_ns`. Throws std::runtime_error("PATH: reason").
std::vector<ImportedOp> import_chrome_trace(const std::string& path, const ImportOptions& options,
                                            const std::vector<ProcessTrace>& traces, Nanos capture_begin, Nanos capture_end);

// Writes and reads DIR/ops-NAME.json, the imported ops of one profile.
void write_imported_ops(const std::string& dir, const std::string& name, const std::string& source, const std::vector<ImportedOp>& ops);
std::vector<ImportedOp> read_imported_ops(const std::string& dir);

}  // namespace tw

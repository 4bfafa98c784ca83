// Which outputs a command may write: never one of its own inputs, nor a file
// that the readers take from an input run or capture directory (run_dir and
// capture_dir own those names): `view RUN -o RUN/rank-0.json` wrecked the run it
// read. Other files there (a report, an analysis written beside a run) may be
// written, and written again.
#pragma once

#include <string>
#include <vector>

namespace tw {

// Throws std::runtime_error "OUT: why" when `out` is one of `inputs` (files or
// directories), a file the readers take from one of them, or a directory.
void check_output_path(const std::string& out, const std::vector<std::string>& inputs);

}  // namespace tw

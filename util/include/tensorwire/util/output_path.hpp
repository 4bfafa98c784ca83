// Where a command may write its output. Two rules that every writer follows:
//  - an existing output that is not a regular file (/dev/null, a FIFO), or is a
//    symlink (/dev/stdout), is written in place, never replaced: writing beside
//    it and renaming over it turned /dev/null into a regular file when run as
//    root;
//  - an output is never one of the command's own inputs, nor a file that the
//    readers take from an input directory (a run's run.json, rank-R.json and
//    .twr, profile.yaml, ...; a capture's session, trace and wire files): `view
//    RUN -o RUN/rank-0.json` wrecked the run it read. Other files there (a
//    report, an analysis) may be written, and written again.
#pragma once

#include <string>
#include <vector>

namespace tw {

// Throws std::runtime_error "OUT: why" when `out` breaks the second rule for
// `inputs` (files or directories), or is a directory.
void check_output_path(const std::string& out, const std::vector<std::string>& inputs);

// True when `path` exists and is not a regular file (a device, a FIFO, a
// socket) or is a symlink to anything but a directory: it is written in place
// (truncated), not through a file beside it.
bool written_in_place(const std::string& path);

// Writes all of `text` to the existing non-regular file `path` (no create, no
// truncate); throws std::runtime_error "PATH: cannot write: ..." on failure.
void write_in_place(const std::string& path, std::string_view text);

}  // namespace tw

// Where a command may write its output. Two rules that every writer follows:
//  - an existing output that is not a regular file (/dev/null, /dev/stdout, a
//    FIFO) is written in place, never replaced: writing beside it and renaming
//    over it turned /dev/null into a regular file when run as root;
//  - an output is never one of the command's own inputs, nor a data file inside
//    an input directory (a run's or a capture's .json, .twr, .twt, .pcap,
//    .yaml): `view RUN -o RUN/rank-0.json` wrecked the run it read.
#pragma once

#include <string>
#include <vector>

namespace tw {

// Throws std::runtime_error "OUT: why" when `out` breaks the second rule for
// `inputs` (files or directories), or is a directory.
void check_output_path(const std::string& out, const std::vector<std::string>& inputs);

// True when `path` exists and is not a regular file (a device, a FIFO, a
// socket): it is written in place, not through a file beside it.
bool written_in_place(const std::string& path);

// Writes all of `text` to the existing non-regular file `path` (no create, no
// truncate); throws std::runtime_error "PATH: cannot write: ..." on failure.
void write_in_place(const std::string& path, std::string_view text);

}  // namespace tw

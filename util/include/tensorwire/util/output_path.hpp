// How every writer writes an output that exists and is not a regular file (a
// device, a FIFO) or is a symlink (/dev/stdout): in place, never replaced.
// Writing beside it and renaming over it turned /dev/null into a regular file
// when run as root. (Which outputs a command may write at all:
// tensorwire/core/output_check.hpp.)
#pragma once

#include <string>
#include <string_view>

namespace tw {

// True when `path` exists and is not a regular file (a device, a FIFO, a
// socket) or is a symlink to anything but a directory: it is written in place
// (truncated), not through a file beside it.
bool written_in_place(const std::string& path);

// Writes all of `text` to the existing non-regular file `path` (no create, no
// truncate); throws std::runtime_error "PATH: cannot write: ..." on failure.
void write_in_place(const std::string& path, std::string_view text);

}  // namespace tw

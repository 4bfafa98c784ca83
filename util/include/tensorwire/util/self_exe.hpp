// The path of the running binary, from /proc/self/exe: what a tensorwire process
// starts its agents with and where it looks for the files installed beside it
// (the capture shim, python/).
#pragma once

#include <string>

namespace tw {

// Throws std::runtime_error when /proc/self/exe cannot be read. Any thread.
std::string self_exe();

}  // namespace tw

// Turning a failed system call into an exception that names it, so that every
// call site reads as the call it makes: system_call("fcntl F_SETFL", ::fcntl(...)).
#pragma once

#include <cerrno>
#include <string_view>
#include <system_error>

namespace tw {

// Throws std::system_error(errno, what) when `result` is negative; returns it
// otherwise. `what` names the call and, where it helps, its object.
template <typename T>
T system_call(std::string_view what, T result) {
  if (result < 0) throw std::system_error(errno, std::generic_category(), std::string(what));
  return result;
}

}  // namespace tw

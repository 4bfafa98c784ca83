// Page faults this process has taken that needed no I/O: a first touch of
// anonymous memory is one, so their count bounds the memory a step touched
// (under glibc's allocator; sanitizers bring their own and shadow memory).
#pragma once

#include <sys/resource.h>

namespace tw::test {

inline long minor_faults() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

}  // namespace tw::test

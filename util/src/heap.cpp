#include "tensorwire/util/heap.hpp"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tw {

void reuse_freed_memory() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kKeepBytes));
  ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * kKeepBytes));
#endif
}

}  // namespace tw

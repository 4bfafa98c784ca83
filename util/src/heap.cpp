#include "tensorwire/util/heap.hpp"

#include <sys/mman.h>

#include <cstdint>
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

void advise_huge_pages(const void* data, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
  if (data == nullptr || bytes < kHugeAdviceBytes) return;
  constexpr std::uintptr_t kHuge = 2u << 20;
  const auto at = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (at + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t end = (at + bytes) & ~(kHuge - 1);
  // Advice only: EINVAL (no transparent huge pages) or ENOMEM leave it as it was.
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace tw

// How tensorwire's own processes use glibc's heap. Not for the capture shim:
// it lives in the job's process, whose allocator is the job's business.
#pragma once

#include <cstddef>
#include <vector>

namespace tw {

// Keeps freed memory of up to kKeepBytes in the process for reuse instead of
// giving it back to the kernel at once: blocks up to that size come from the
// heap rather than from their own mappings, and the heap is trimmed only above
// it. A block given back and asked for again costs a page fault a page (16 us
// a page on a virtual machine here): an agent loading its slice of a 256-rank
// ring faults a third fewer pages with this (docs/BENCHMARKS.md, set-up message
// of one agent). Call once, first thing in main; a no-op where the
// allocator is not glibc's (sanitizers bring their own).
void reuse_freed_memory();

inline constexpr long kKeepBytes = 32L << 20;

// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes)
// with transparent huge pages (madvise MADV_HUGEPAGE): one page fault and one
// zeroing per 2 MiB instead of 512 faults. For the large arrays that the
// simulator and the synthesiser fill once (a 1024-rank ring is 21 million ops,
// 1.2 GB of nodes: seconds of page faults at 4 KiB). Call before the memory is first
// written; below kHugeAdviceBytes, or where the kernel has no transparent huge
// pages or refuses, it does nothing (the memory works as before).
void advise_huge_pages(const void* data, std::size_t bytes);
inline constexpr std::size_t kHugeAdviceBytes = 8u << 20;

// Grows v's capacity to `n` elements, in a new block advised huge pages
// (advise_huge_pages), before the elements are written: those already in v are
// moved into it, the rest come in with the pages. Nothing when v holds n already.
template <typename T, typename A>
void reserve_huge(std::vector<T, A>& v, std::size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

// v.assign(n, value), in memory advised huge pages when it is new.
template <typename T, typename A>
void assign_huge(std::vector<T, A>& v, std::size_t n, const T& value) {
  reserve_huge(v, n);
  v.assign(n, value);
}

}  // namespace tw

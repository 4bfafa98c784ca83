// How tensorwire's own processes use glibc's heap. Not for the capture shim:
// it lives in the job's process, whose allocator is the job's business.
#pragma once

namespace tw {

// Keeps freed memory of up to kKeepBytes in the process for reuse instead of
// giving it back to the kernel at once: blocks up to that size come from the
// heap rather than from their own mappings, and the heap is trimmed only above
// it. A block given back and asked for again costs a page fault a page (16 us
// a page on a virtual machine here): an agent loading its slice faulted 1 527
// pages, 1 050 with this. Call once, first thing in main; a no-op where the
// allocator is not glibc's (sanitizers bring their own).
void reuse_freed_memory();

inline constexpr long kKeepBytes = 32L << 20;

}  // namespace tw

// Views for the kernel's socket copies: each at the stream position's offset
// modulo kCopyAlign, and within its buffer whatever the buffer's own alignment.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "copy_alignment.hpp"

namespace tw {
namespace {

TEST(CopyAlignment, AViewSitsAtTheStreamPositionModuloTheAlignmentInsideItsBuffer) {
  std::vector<std::byte> storage(4096 + kCopySlack + kCopyAlign);
  for (std::size_t shift = 0; shift < kCopyAlign; ++shift) {  // buffers starting at every alignment
    const std::span<std::byte> buffer(storage.data() + shift, 4096 + kCopySlack);
    const std::size_t longest = aligned_view_size(buffer.size());
    EXPECT_EQ(longest, 4096U);
    for (const std::uint64_t pos : {0ULL, 1ULL, 24ULL, 63ULL, 64ULL, 65ULL, 131096ULL, (1ULL << 40) + 37}) {
      const std::byte* v = aligned_view(buffer, pos);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v) % kCopyAlign, pos % kCopyAlign) << "shift " << shift << " pos " << pos;
      EXPECT_GE(v, buffer.data());
      EXPECT_LE(v + longest, buffer.data() + buffer.size()) << "shift " << shift << " pos " << pos;
    }
  }
}

TEST(CopyAlignment, ConstBuffersGetConstViews) {
  const std::vector<std::byte> storage(1 + kCopySlack);
  const std::byte* v = aligned_view(std::span<const std::byte>(storage), 5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v) % kCopyAlign, 5U);
  EXPECT_LE(v + aligned_view_size(storage.size()), storage.data() + storage.size());
}

}  // namespace
}  // namespace tw

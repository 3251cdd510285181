// SPDX-License-Identifier: Apache-2.0
#include "isowatch/common/huge_page_allocator.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace isowatch {
namespace {

// Small allocations come from the default allocator; from the threshold on they are aligned to
// a huge page, so that the kernel can back them with huge pages from their first byte.
TEST(HugePageAllocatorTest, AlignsLargeAllocationsToHugePages) {
  HugePageAllocator<uint64_t> a;
  const size_t small = 1000;
  uint64_t* p = a.allocate(small);
  ASSERT_NE(p, nullptr);
  p[small - 1] = 1;
  a.deallocate(p, small);

  const size_t large = kHugePageThreshold / sizeof(uint64_t) + 3;  // not a whole huge page
  uint64_t* q = a.allocate(large);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % kHugePageBytes, 0u);
  q[0] = 1;
  q[large - 1] = 2;  // the whole allocation is usable
  EXPECT_EQ(q[0] + q[large - 1], 3u);
  a.deallocate(q, large);
}

// A BigVector keeps its elements across the growth from small to huge-page-backed storage and
// back (shrink_to_fit), as a std::vector does.
TEST(HugePageAllocatorTest, BigVectorKeepsItsElementsAcrossGrowth) {
  BigVector<uint32_t> v;
  const uint32_t n = 3 * kHugePageThreshold / sizeof(uint32_t);
  for (uint32_t i = 0; i < n; ++i) v.push_back(i);
  ASSERT_EQ(v.size(), n);
  EXPECT_GE(v.capacity() * sizeof(uint32_t), kHugePageThreshold);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  uint64_t sum = std::accumulate(v.begin(), v.end(), uint64_t{0});
  EXPECT_EQ(sum, uint64_t{n} * (n - 1) / 2);
  v.resize(10);
  v.shrink_to_fit();
  ASSERT_EQ(v.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(v[i], i);
  BigVector<uint32_t> w = v;  // copies use the same allocator
  EXPECT_EQ(w, v);
}

}  // namespace
}  // namespace isowatch

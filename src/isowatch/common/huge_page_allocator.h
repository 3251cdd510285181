// SPDX-License-Identifier: Apache-2.0
#pragma once

// An allocator for the few vectors that grow to hundreds of megabytes (a history's transactions,
// operations and list elements): it asks the kernel to back them with transparent huge pages.
//
// Filling such a vector faults in its memory one page at a time. With 4 KiB pages that is a
// quarter of a million faults per gigabyte, and on a virtual machine each is expensive: reading a
// 1M-transaction history spent more time in the kernel's page-fault path than in the reader
// (bench/README.md, "Reading history formats"). Debian's kernels enable transparent huge pages
// for memory that asks for them (`madvise` mode), so a 2 MiB-aligned allocation advised with
// MADV_HUGEPAGE before it is first touched is faulted in 2 MiB at a time. Small allocations go
// to the default allocator: rounding them up to 2 MiB would waste the memory this saves time on.
// Where huge pages are off, the advice is ignored and nothing changes.

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <sys/mman.h>
#include <vector>

namespace isowatch {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Allocations from this size on are huge-page aligned and advised.
inline constexpr size_t kHugePageThreshold = size_t{4} << 20;

template <class T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>& /*other*/) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n > std::allocator_traits<std::allocator<T>>::max_size(std::allocator<T>())) {
      throw std::bad_array_new_length();
    }
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageThreshold) return std::allocator<T>().allocate(n);
    const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = std::aligned_alloc(kHugePageBytes, rounded);
    if (p == nullptr) throw std::bad_alloc();
    // Advice only: where the kernel has no huge pages to give, the pages are small.
    (void)madvise(p, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < kHugePageThreshold) {
      std::allocator<T>().deallocate(p, n);
    } else {
      std::free(p);  // NOLINT(cppcoreguidelines-no-malloc): from aligned_alloc
    }
  }

  friend bool operator==(const HugePageAllocator& /*a*/, const HugePageAllocator& /*b*/) {
    return true;
  }
};

// A vector that may grow large: backed by huge pages once it does.
template <class T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace isowatch

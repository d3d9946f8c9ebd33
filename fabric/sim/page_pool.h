// PagePool: zeroed, fixed-size pages for SparseMemory, carved from large
// anonymous mappings.
//
// Why not new[]: a value-initialised heap page is zeroed twice (the kernel
// zeroes it on first touch, then memset does), and every page is a malloc.
// Mapped memory arrives zeroed, and only the host pages actually written
// become resident. A page given back is emptied with MADV_DONTNEED, which
// also returns it to the kernel, and reads as zeros when it is taken again.
//
// Maps are 2 MB-aligned and advised MADV_HUGEPAGE when their size allows, so
// a node's memory costs one page fault per 2 MB where the kernel agrees.
//
// Contract: page_bytes is a multiple of the host page size; one thread.
#pragma once

#include <cstdint>
#include <vector>

namespace dmb::sim {

class PagePool {
 public:
  explicit PagePool(uint64_t page_bytes, uint64_t pages_per_map = 32);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A page of page_bytes zeros; throws std::bad_alloc when no memory is left.
  uint8_t* Take();
  // Returns a page from Take(); its bytes are zeros again when next taken.
  void Give(uint8_t* page);

  uint64_t page_bytes() const { return page_bytes_; }

 private:
  static constexpr uint64_t kHugeBytes = 2ull << 20;
  uint8_t* Map();

  uint64_t page_bytes_;
  uint64_t map_bytes_;
  std::vector<void*> maps_;
  std::vector<uint8_t*> free_;
  uint8_t* next_ = nullptr;  // the newest map's first page not yet taken
  uint8_t* end_ = nullptr;
};

}  // namespace dmb::sim

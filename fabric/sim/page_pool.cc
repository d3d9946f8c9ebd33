#include "fabric/sim/page_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace dmb::sim {

PagePool::PagePool(uint64_t page_bytes, uint64_t pages_per_map)
    : page_bytes_(page_bytes), map_bytes_(page_bytes * pages_per_map) {}

PagePool::~PagePool() {
  for (void* m : maps_) munmap(m, map_bytes_);
}

uint8_t* PagePool::Take() {
  if (!free_.empty()) {
    uint8_t* p = free_.back();
    free_.pop_back();
    return p;
  }
  if (next_ == end_) {
    next_ = Map();
    end_ = next_ + map_bytes_;
  }
  uint8_t* p = next_;
  next_ += page_bytes_;
  return p;
}

// A fresh mapping of map_bytes_, aligned to a huge page when it is a whole
// number of them, so the kernel can back it with huge pages (one fault per
// 2 MB instead of 512; pages are handed out in order, so they fill up).
uint8_t* PagePool::Map() {
  const bool huge = map_bytes_ % kHugeBytes == 0;
  const uint64_t len = map_bytes_ + (huge ? kHugeBytes : 0);
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  auto* raw = static_cast<uint8_t*>(m);
  uint8_t* p = raw;
  if (huge) {
    const auto at = reinterpret_cast<uintptr_t>(raw);
    p = raw + ((kHugeBytes - at % kHugeBytes) % kHugeBytes);
    if (p > raw) munmap(raw, p - raw);
    if (raw + len > p + map_bytes_) munmap(p + map_bytes_, raw + len - (p + map_bytes_));
    madvise(p, map_bytes_, MADV_HUGEPAGE);  // advice only: fine if refused
  }
  maps_.push_back(p);
  return p;
}

void PagePool::Give(uint8_t* page) {
  // Private anonymous memory reads as zeros after MADV_DONTNEED.
  if (madvise(page, page_bytes_, MADV_DONTNEED) != 0) {
    for (uint64_t i = 0; i < page_bytes_; ++i) page[i] = 0;
  }
  free_.push_back(page);
}

}  // namespace dmb::sim

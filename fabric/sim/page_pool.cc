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
    void* m = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    maps_.push_back(m);
    next_ = static_cast<uint8_t*>(m);
    end_ = next_ + map_bytes_;
  }
  uint8_t* p = next_;
  next_ += page_bytes_;
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

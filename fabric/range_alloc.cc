#include "fabric/range_alloc.h"

#include <iterator>
#include <stdexcept>

#include "fabric/node.h"

namespace dmb::fabric {

RangeAllocator::RangeAllocator(std::string node_name, uint64_t base, uint64_t size)
    : node_name_(std::move(node_name)), size_(size), next_free_(base) {}

uint64_t RangeAllocator::Alloc(uint64_t bytes, uint64_t align) {
  if (align == 0 || (align & (align - 1)) != 0) {
    throw std::invalid_argument("Alloc alignment must be a power of two, got " +
                                std::to_string(align));
  }
  uint64_t start = 0;
  bool found = false;
  for (auto it = free_.begin(); bytes > 0 && it != free_.end(); ++it) {
    const uint64_t a = it->first, end = it->first + it->second;
    const uint64_t s = (a + align - 1) & ~(align - 1);
    if (s < a || s > end || bytes > end - s) continue;
    free_.erase(it);
    if (s > a) free_[a] = s - a;
    if (s + bytes < end) free_[s + bytes] = end - (s + bytes);
    start = s;
    found = true;
    break;
  }
  if (!found) start = BumpAlloc(&next_free_, size_, bytes, align, node_name_);
  if (bytes > 0) {
    live_[start] = bytes;
    in_use_ += bytes;
  }
  return start;
}

void RangeAllocator::Free(uint64_t addr, uint64_t bytes) {
  if (bytes == 0) return;
  auto live = live_.find(addr);
  if (live == live_.end() || live->second != bytes) {
    throw std::invalid_argument("node '" + node_name_ + "': Free of [" + std::to_string(addr) +
                                ", +" + std::to_string(bytes) +
                                ") names no live allocation (a double free, or not the range "
                                "Alloc returned)");
  }
  live_.erase(live);
  in_use_ -= bytes;
  uint64_t a = addr, end = addr + bytes;
  auto next = free_.lower_bound(a);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == a) {
      a = prev->first;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == end) {
    end += next->second;
    free_.erase(next);
  }
  if (end == next_free_) {
    next_free_ = a;  // the top shrinks: later allocations grow from here again
  } else {
    free_[a] = end - a;
  }
}

}  // namespace dmb::fabric

// The address bookkeeping behind Memory::Alloc / Memory::Free for memories
// that hand out addresses of one linear range [base, size): bottom-up (as
// BumpAlloc) until something is freed, then first fit among the freed ranges
// (coalesced) before growing further. A memory that never frees lays out
// exactly as BumpAlloc did.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace dmb::fabric {

class RangeAllocator {
 public:
  // Addresses below `base` are never handed out (address 0 stays unused).
  RangeAllocator(std::string node_name, uint64_t base, uint64_t size);

  // `bytes` aligned to `align` (a power of two). Throws std::invalid_argument
  // (alignment) or VerbsError(ENOMEM) naming the node, as BumpAlloc.
  uint64_t Alloc(uint64_t bytes, uint64_t align);
  // Takes back exactly one live allocation (its address and size). Throws
  // std::invalid_argument naming the node for anything else (a double free,
  // a partial range). Freeing zero bytes does nothing.
  void Free(uint64_t addr, uint64_t bytes);

  uint64_t in_use_bytes() const { return in_use_; }
  // One past the highest address handed out (what BumpAlloc's cursor was).
  uint64_t top() const { return next_free_; }
  size_t free_ranges() const { return free_.size(); }

 private:
  std::string node_name_;
  uint64_t size_;
  uint64_t next_free_;
  uint64_t in_use_ = 0;
  std::map<uint64_t, uint64_t> live_;  // address -> bytes
  std::map<uint64_t, uint64_t> free_;  // address -> bytes, coalesced, all below next_free_
};

}  // namespace dmb::fabric

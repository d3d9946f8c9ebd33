// SwapSpace: one CN's swap device as the paging model sees it: the slot
// allocator (SwapMap), the per-CPU slot caches (SwapSlots), the kernel-wide
// readahead window (SwapReadahead) and which cgroup page each slot holds
// (the swap cache's reverse map, which readahead needs because a window
// may hold other tasks' pages).
//
// Contract: cgroups attach before use and detach before they are destroyed;
// a slot has an owner only while it holds a page's copy.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "apps/swap/readahead.h"
#include "apps/swap/swap_map.h"
#include "apps/swap/swap_slots.h"

namespace dmb::apps::swap {

class CgroupMemory;

struct SwapSpaceSpec {
  SwapAreaSpec area;
  bool slot_cache = true;     // mm/swap_slots.c
  uint32_t page_cluster = 3;  // vm.page-cluster: readahead up to 2^3 pages
};

struct SlotOwner {
  uint32_t cgroup = 0;
  uint64_t page = 0;
};

class SwapSpace {
 public:
  explicit SwapSpace(const SwapSpaceSpec& spec);
  SwapSpace(const SwapSpace&) = delete;
  SwapSpace& operator=(const SwapSpace&) = delete;

  SwapMap& map() { return map_; }
  SwapSlots& slots() { return slots_; }
  SwapReadahead& readahead() { return readahead_; }

  uint32_t Attach(CgroupMemory* cg);
  void Detach(uint32_t id) { cgroups_[id] = nullptr; }
  CgroupMemory* cgroup(uint32_t id) const { return cgroups_[id]; }

  void SetOwner(uint64_t slot, SlotOwner o);
  void ClearOwner(uint64_t slot) { owner_cg_[slot] = kNoOwner; }
  std::optional<SlotOwner> OwnerOf(uint64_t slot) const;
  // Slots given back to the allocator since the last call (their remote
  // copies may be invalidated); see SwapSlots::TakeReleased.
  std::vector<uint64_t> TakeReleased() { return slots_.TakeReleased(); }

 private:
  static constexpr uint32_t kNoOwner = ~uint32_t{0};
  SwapMap map_;
  SwapSlots slots_;
  SwapReadahead readahead_;
  std::vector<CgroupMemory*> cgroups_;
  std::vector<uint32_t> owner_cg_;
  std::vector<uint64_t> owner_page_;
};

}  // namespace dmb::apps::swap

// SwapSlots: Linux 4.15's per-CPU swap slot cache (mm/swap_slots.c) over a
// SwapMap.
//
// - Allocation (get_swap_page): each CPU keeps up to 64 slots
//   (SWAP_SLOTS_CACHE_SIZE) taken in one get_swap_pages() batch and hands
//   them out in order; an empty cache refills with one batch on the CPU that
//   asks. With the cache inactive a slot comes straight from the SwapMap.
// - Activation (check_cache_active): the cache turns active when more than
//   5 x 64 x cpus slots are free and inactive (after draining every CPU's
//   caches back to the map) when fewer than 2 x 64 x cpus are free.
// - Freeing (free_swap_slot): a freed slot is parked in the freeing CPU's
//   return buffer (slots_ret); when the buffer already holds 64 they are all
//   given back (swapcache_free_entries) before the new one is parked. A
//   parked slot stays in use in the SwapMap (SWAP_HAS_CACHE): its cluster
//   does not turn free and it is not handed out again until the batch goes
//   back. Only then does the kernel call frontswap_invalidate_page(): the
//   freed slots given back are logged, and TakeReleased() hands them to the
//   caller, whose remote copies may then go. (Unused slots of an allocation
//   cache drained on deactivation go back too but never held data, so they
//   are not logged.)
//
// Contract: cpu < map.cpus(); a slot is freed once, after being allocated.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "apps/swap/swap_map.h"

namespace dmb::apps::swap {

inline constexpr uint32_t kSlotsCacheSize = 64;  // SWAP_SLOTS_CACHE_SIZE

class SwapSlots {
 public:
  // `enabled` false models a kernel without the slot cache: every allocation
  // is a one-slot scan, every free is immediate.
  explicit SwapSlots(SwapMap& map, bool enabled = true);

  // get_swap_page() on `cpu`: a slot, or nullopt when swap is full.
  std::optional<uint64_t> GetSwapPage(uint32_t cpu);
  // free_swap_slot() on `cpu`: parks `slot`, first giving back the parked
  // batch when it is full (or gives `slot` back at once, cache disabled).
  void FreeSwapSlot(uint32_t cpu, uint64_t slot);
  // Gives back every slot parked in `cpu`'s return buffer (as CPU hotplug or
  // exit-time draining does).
  void DrainReturns(uint32_t cpu);
  // The freed slots given back to the SwapMap since the last call, in the
  // order given back (each batch sorted); clears the log.
  std::vector<uint64_t> TakeReleased();

  bool active() const { return active_; }
  uint32_t cached(uint32_t cpu) const {
    return static_cast<uint32_t>(caches_[cpu].slots.size() - caches_[cpu].cur);
  }
  uint32_t parked(uint32_t cpu) const { return static_cast<uint32_t>(caches_[cpu].ret.size()); }
  uint64_t refills() const { return refills_; }
  SwapMap& map() { return map_; }
  const SwapMap& map() const { return map_; }

 private:
  struct Cache {
    std::vector<uint64_t> slots;  // the last batch; [cur, size) not yet handed out
    size_t cur = 0;
    std::vector<uint64_t> ret;
  };

  bool CheckCacheActive();
  void Deactivate();
  void GiveBack(std::vector<uint64_t> slots);

  SwapMap& map_;
  bool enabled_;
  bool active_ = false;
  uint64_t refills_ = 0;
  std::vector<Cache> caches_;
  std::vector<uint64_t> released_;
};

}  // namespace dmb::apps::swap

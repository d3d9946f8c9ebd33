#include "apps/swap/swap_slots.h"

#include <algorithm>

namespace dmb::apps::swap {
namespace {

constexpr uint64_t kActivatePerCpu = 5 * kSlotsCacheSize;  // THRESHOLD_ACTIVATE_SWAP_SLOTS_CACHE
constexpr uint64_t kDeactivatePerCpu =
    2 * kSlotsCacheSize;  // THRESHOLD_DEACTIVATE_SWAP_SLOTS_CACHE

}  // namespace

SwapSlots::SwapSlots(SwapMap& map, bool enabled)
    : map_(map), enabled_(enabled), caches_(map.cpus()) {}

bool SwapSlots::CheckCacheActive() {
  if (!enabled_) return false;
  uint64_t free = map_.free_pages();
  if (!active_) {
    if (free > map_.cpus() * kActivatePerCpu) active_ = true;
  } else if (free < map_.cpus() * kDeactivatePerCpu) {
    Deactivate();
  }
  return active_;
}

// deactivate_swap_slots_cache(): drains SLOTS_CACHE | SLOTS_CACHE_RET.
void SwapSlots::Deactivate() {
  active_ = false;
  for (uint32_t cpu = 0; cpu < caches_.size(); ++cpu) {
    Cache& c = caches_[cpu];
    std::vector<uint64_t> left(c.slots.begin() + static_cast<ptrdiff_t>(c.cur), c.slots.end());
    c.slots.clear();
    c.cur = 0;
    if (!left.empty()) map_.FreeEntries(std::move(left));
    DrainReturns(cpu);
  }
}

std::optional<uint64_t> SwapSlots::GetSwapPage(uint32_t cpu) {
  if (CheckCacheActive()) {
    Cache& c = caches_[cpu];
    if (c.cur == c.slots.size()) {  // refill_swap_slots_cache()
      c.slots = map_.AllocSlots(cpu, kSlotsCacheSize);
      c.cur = 0;
      ++refills_;
    }
    if (c.cur < c.slots.size()) return c.slots[c.cur++];
  }
  std::vector<uint64_t> one = map_.AllocSlots(cpu, 1);
  if (one.empty()) return std::nullopt;
  return one[0];
}

void SwapSlots::GiveBack(std::vector<uint64_t> slots) {
  if (slots.empty()) return;
  std::sort(slots.begin(), slots.end());  // as swapcache_free_entries() does
  map_.FreeEntries(slots);
  released_.insert(released_.end(), slots.begin(), slots.end());
}

void SwapSlots::FreeSwapSlot(uint32_t cpu, uint64_t slot) {
  if (!enabled_) return GiveBack({slot});
  Cache& c = caches_[cpu];
  if (c.ret.size() >= kSlotsCacheSize) DrainReturns(cpu);
  c.ret.push_back(slot);
}

void SwapSlots::DrainReturns(uint32_t cpu) {
  std::vector<uint64_t> back;
  back.swap(caches_[cpu].ret);
  GiveBack(std::move(back));
}

std::vector<uint64_t> SwapSlots::TakeReleased() {
  std::vector<uint64_t> out;
  out.swap(released_);
  return out;
}

}  // namespace dmb::apps::swap

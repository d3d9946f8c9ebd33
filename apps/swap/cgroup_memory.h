// CgroupMemory: one task's local memory in the paging model: which of its
// pages are resident, which sit in swap slots, which slots they keep, and
// when reclaim must run. No time and no fabric: each call says what the
// kernel would do (fault kind, the slots to READ synchronously and ahead,
// the pages to WRITE to which slots); the driver turns that into verbs.
//
// Follows Linux 4.15 as Fastswap runs it:
// - Budget: the cgroup's memory.high = local ratio x working set, in pages.
//   Resident pages (mapped, or read ahead into the swap cache) are charged.
//   Need() says who reclaims: nobody at or under high; the dedicated reclaim
//   core (Fastswap offload) when over by up to `direct_reclaim_over_pages`
//   (2,048); the faulting application thread itself (direct reclaim) when
//   over by more, for the excess beyond that threshold. Reclaim works in
//   batches of SWAP_CLUSTER_MAX (32) pages.
// - Reclaim takes the least recently used page. A page with a slot is clean
//   (the slot still holds its copy): it is dropped without I/O. Any other
//   page gets a slot from the reclaiming CPU's slot cache and is written.
// - Slot lifetime (do_swap_page, do_wp_page, zap_pte_range): a swap-in keeps
//   the slot (the page stays clean) unless the access writes
//   (reuse_swap_page) or swap is more than half full (vm_swap_full ->
//   try_to_free_swap, which dirties the page); a later write to a clean
//   page frees its slot; munmap and exit free every slot of the range. A
//   slot freed by the task goes through the freeing CPU's slot cache.
// - Swap-in: a miss reads the faulting slot synchronously and, around it,
//   the kernel's offset-based readahead window; every slot of the window
//   holding a swapped-out page (of any cgroup on the CN) is read
//   asynchronously into the swap cache, charged to its owner. A later touch
//   of such a page is a minor fault (a readahead hit).
//
// Simplifications (documented, not hidden): a first touch of a page, read
// or write, allocates and charges it (no zero-page sharing); the LRU is
// exact rather than the kernel's two-list approximation; readahead pages
// are charged when read (4.15 charges them only when mapped).
//
// Contract: page < spec.pages; cpu < the SwapSpace's cpus; calls are
// sequential (the simulator is single-threaded).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "apps/swap/page_lru.h"
#include "apps/swap/swap_space.h"

namespace dmb::apps::swap {

struct CgroupSpec {
  uint64_t pages = 0;       // the task's virtual pages: ids 0..pages-1
  uint64_t high_pages = 0;  // memory.high
  uint32_t reclaim_cpu = 0;
  uint64_t direct_reclaim_over_pages = 2048;  // Fastswap's offload limit
  uint32_t reclaim_batch_pages = 32;          // SWAP_CLUSTER_MAX
};

enum class Fault : uint8_t {
  kHit,           // resident and mapped
  kFirstTouch,    // a new anonymous page
  kSwapCacheHit,  // resident in the swap cache (read ahead): minor fault
  kMajor,         // in a slot only: synchronous swap-in
};

struct SwapIo {
  uint32_t cgroup = 0;
  uint64_t page = 0;
  uint64_t slot = 0;
};

struct TouchResult {
  Fault fault = Fault::kHit;
  std::optional<uint64_t> sync_read_slot;  // kMajor: the faulting page's slot
  std::vector<SwapIo> readahead;           // async READs into the swap cache
};

enum class ReclaimMode : uint8_t { kNone, kBackground, kDirect };

struct ReclaimNeed {
  ReclaimMode mode = ReclaimMode::kNone;
  uint64_t pages = 0;  // to reclaim now, whole batches
};

struct ReclaimResult {
  std::vector<SwapIo> writes;  // pages written out, each to its new slot
  uint64_t clean_dropped = 0;  // evicted without I/O (slot kept)
  uint64_t no_slot = 0;        // victims kept because swap is full
};

enum class PageState : uint8_t { kNone, kResident, kSwapped };

class CgroupMemory {
 public:
  CgroupMemory(SwapSpace& space, const CgroupSpec& spec);
  ~CgroupMemory();
  CgroupMemory(const CgroupMemory&) = delete;
  CgroupMemory& operator=(const CgroupMemory&) = delete;

  // The task on `cpu` reads or writes `page`.
  TouchResult Touch(uint64_t page, bool write, uint32_t cpu);
  // Who must reclaim now, and how much.
  ReclaimNeed Need() const;
  // Evicts up to `pages` least recently used pages; slots for dirty pages
  // come from `cpu`'s slot cache.
  ReclaimResult Reclaim(uint32_t cpu, uint64_t pages);
  // munmap of [first, first + n) on `cpu`: frees slots, uncharges pages.
  void Unmap(uint64_t first, uint64_t n, uint32_t cpu);
  // exit: Unmap of every page.
  void Exit(uint32_t cpu) { Unmap(0, spec_.pages, cpu); }

  // Called by another cgroup's swap-in whose readahead window reached this
  // swapped-out page: it enters the swap cache, charged, not mapped.
  void AdmitReadahead(uint64_t page);

  uint32_t id() const { return id_; }
  const CgroupSpec& spec() const { return spec_; }
  uint64_t resident_pages() const { return lru_.size(); }
  uint64_t slots_held() const { return slots_held_; }
  PageState state(uint64_t page) const { return static_cast<PageState>(state_[page]); }
  std::optional<uint64_t> slot(uint64_t page) const;
  bool dirty(uint64_t page) const { return dirty_[page]; }

 private:
  static constexpr uint64_t kNoSlot = ~uint64_t{0};

  void MakeResident(uint64_t page, bool mapped);
  void AfterSwapin(uint64_t page, bool write, uint32_t cpu);
  void FreeSlot(uint64_t page, uint32_t cpu);
  void ReadAhead(uint64_t fault_slot, TouchResult* r);
  bool Evict(uint64_t page, uint32_t cpu, ReclaimResult* r);

  SwapSpace& space_;
  CgroupSpec spec_;
  uint32_t id_;
  PageLru lru_;
  std::vector<uint8_t> state_;
  std::vector<uint64_t> slot_;
  std::vector<bool> dirty_;
  std::vector<bool> mapped_;
  std::vector<bool> ra_mark_;  // PageReadahead
  uint64_t slots_held_ = 0;
};

}  // namespace dmb::apps::swap

// SwapReadahead: Linux 4.15's offset-based swap readahead window
// (mm/swap_state.c: swapin_nr_pages, __swapin_nr_pages, swapin_readahead).
//
// On a swap-cache miss at slot `offset` the kernel reads a window of
// swapin_nr_pages(offset) slots, aligned to its size, around the offset:
// - hits = readahead pages found in the swap cache since the last window
//   (reset to 0 on every window; the counter starts at 4);
// - pages = hits + 2; with no hits, 1 unless offset is next to the previous
//   no-hit fault's offset (then 2); with hits, rounded up to a power of two
//   of at least 4;
// - capped at 2^page_cluster (page-cluster=3: 8 pages) and never below half
//   the previous window ("don't shrink readahead too fast");
// - the window [offset & ~(pages-1), offset | (pages-1)] skips slot 0 (the
//   header) and stops at the last slot. A window of one page reads nothing
//   ahead.
// The kernel then reads every slot of the window that holds a swapped-out
// page not already in the swap cache; free slots are skipped. That filtering
// is the caller's (it knows the pages); this class only sizes the window.
//
// One instance per kernel (CN): the kernel's counters are global.
#pragma once

#include <cstdint>

namespace dmb::apps::swap {

struct ReadaheadWindow {
  uint64_t first = 0;  // slots [first, last]
  uint64_t last = 0;
  uint32_t pages = 1;  // the window size swapin_nr_pages chose (before clipping)
};

class SwapReadahead {
 public:
  explicit SwapReadahead(uint32_t page_cluster = 3) : page_cluster_(page_cluster) {}

  // swapin_nr_pages() + the window of swapin_readahead() for a fault at
  // `offset` in an area of `max_pages` slots. pages == 1: read the faulting
  // slot alone.
  ReadaheadWindow Window(uint64_t offset, uint64_t max_pages);
  // A fault found a page marked PageReadahead in the swap cache
  // (lookup_swap_cache: swapin_readahead_hits++).
  void Hit() { ++hits_; }

  uint32_t hits() const { return hits_; }

 private:
  uint32_t NrPages(uint64_t offset);

  uint32_t page_cluster_;
  uint32_t hits_ = 4;  // ATOMIC_INIT(4)
  uint64_t prev_offset_ = 0;
  uint32_t last_readahead_pages_ = 0;
};

}  // namespace dmb::apps::swap

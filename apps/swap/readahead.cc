#include "apps/swap/readahead.h"

namespace dmb::apps::swap {

// swapin_nr_pages() and __swapin_nr_pages().
uint32_t SwapReadahead::NrPages(uint64_t offset) {
  uint32_t max_pages = 1u << page_cluster_;
  if (max_pages <= 1) return 1;
  uint32_t hits = hits_;
  hits_ = 0;
  uint32_t pages = hits + 2;
  if (pages == 2) {
    if (offset != prev_offset_ + 1 && offset != prev_offset_ - 1) pages = 1;
  } else {
    uint32_t roundup = 4;
    while (roundup < pages) roundup <<= 1;
    pages = roundup;
  }
  if (pages > max_pages) pages = max_pages;
  uint32_t last_ra = last_readahead_pages_ / 2;
  if (pages < last_ra) pages = last_ra;
  if (hits == 0) prev_offset_ = offset;
  last_readahead_pages_ = pages;
  return pages;
}

ReadaheadWindow SwapReadahead::Window(uint64_t offset, uint64_t max_pages) {
  ReadaheadWindow w;
  w.pages = NrPages(offset);
  w.first = w.last = offset;
  if (w.pages <= 1) return w;
  uint64_t mask = w.pages - 1;
  w.first = offset & ~mask;
  w.last = offset | mask;
  if (w.first == 0) w.first = 1;
  if (w.last >= max_pages) w.last = max_pages - 1;
  return w;
}

}  // namespace dmb::apps::swap

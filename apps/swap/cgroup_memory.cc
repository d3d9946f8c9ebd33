#include "apps/swap/cgroup_memory.h"

#include <stdexcept>

namespace dmb::apps::swap {

CgroupMemory::CgroupMemory(SwapSpace& space, const CgroupSpec& spec)
    : space_(space),
      spec_(spec),
      id_(space.Attach(this)),
      lru_(spec.pages),
      state_(spec.pages, static_cast<uint8_t>(PageState::kNone)),
      slot_(spec.pages, kNoSlot),
      dirty_(spec.pages, false),
      mapped_(spec.pages, false),
      ra_mark_(spec.pages, false) {
  if (spec.reclaim_batch_pages == 0) throw std::invalid_argument("reclaim batch of 0 pages");
}

CgroupMemory::~CgroupMemory() { space_.Detach(id_); }

std::optional<uint64_t> CgroupMemory::slot(uint64_t page) const {
  if (slot_[page] == kNoSlot) return std::nullopt;
  return slot_[page];
}

void CgroupMemory::MakeResident(uint64_t page, bool mapped) {
  state_[page] = static_cast<uint8_t>(PageState::kResident);
  mapped_[page] = mapped;
  lru_.PushMru(page);
}

void CgroupMemory::FreeSlot(uint64_t page, uint32_t cpu) {
  uint64_t s = slot_[page];
  space_.ClearOwner(s);
  space_.slots().FreeSwapSlot(cpu, s);
  slot_[page] = kNoSlot;
  --slots_held_;
}

// do_swap_page() after the page is in the swap cache and mapped.
void CgroupMemory::AfterSwapin(uint64_t page, bool write, uint32_t cpu) {
  if (write || space_.map().SwapFull()) {
    FreeSlot(page, cpu);
    dirty_[page] = true;
  }
}

TouchResult CgroupMemory::Touch(uint64_t page, bool write, uint32_t cpu) {
  TouchResult r;
  switch (static_cast<PageState>(state_[page])) {
    case PageState::kNone:
      r.fault = Fault::kFirstTouch;
      MakeResident(page, /*mapped=*/true);
      dirty_[page] = true;
      return r;
    case PageState::kResident:
      lru_.Touch(page);
      if (!mapped_[page]) {  // found in the swap cache
        r.fault = Fault::kSwapCacheHit;
        if (ra_mark_[page]) space_.readahead().Hit();
        ra_mark_[page] = false;
        mapped_[page] = true;
        AfterSwapin(page, write, cpu);
      } else if (write && slot_[page] != kNoSlot) {  // do_wp_page: reuse_swap_page
        FreeSlot(page, cpu);
        dirty_[page] = true;
      }
      return r;
    case PageState::kSwapped:
      r.fault = Fault::kMajor;
      r.sync_read_slot = slot_[page];
      ReadAhead(slot_[page], &r);
      MakeResident(page, /*mapped=*/true);
      AfterSwapin(page, write, cpu);
      return r;
  }
  return r;
}

// swapin_readahead(): every slot of the window holding a swapped-out page.
void CgroupMemory::ReadAhead(uint64_t fault_slot, TouchResult* r) {
  ReadaheadWindow w = space_.readahead().Window(fault_slot, space_.map().max_pages());
  if (w.pages <= 1) return;
  for (uint64_t s = w.first; s <= w.last; ++s) {
    if (s == fault_slot) continue;
    std::optional<SlotOwner> o = space_.OwnerOf(s);
    if (!o) continue;
    CgroupMemory* cg = space_.cgroup(o->cgroup);
    if (cg == nullptr || cg->state(o->page) != PageState::kSwapped) continue;
    cg->AdmitReadahead(o->page);
    r->readahead.push_back({o->cgroup, o->page, s});
  }
}

void CgroupMemory::AdmitReadahead(uint64_t page) {
  if (state(page) != PageState::kSwapped) throw std::logic_error("readahead of a page not in swap");
  MakeResident(page, /*mapped=*/false);
  ra_mark_[page] = true;
  dirty_[page] = false;
}

ReclaimNeed CgroupMemory::Need() const {
  uint64_t usage = resident_pages();
  if (usage <= spec_.high_pages) return {};
  uint64_t over = usage - spec_.high_pages;
  uint64_t b = spec_.reclaim_batch_pages;
  auto batches = [b](uint64_t n) { return (n + b - 1) / b * b; };
  if (over > spec_.direct_reclaim_over_pages) {
    return {ReclaimMode::kDirect, batches(over - spec_.direct_reclaim_over_pages)};
  }
  return {ReclaimMode::kBackground, batches(over)};
}

bool CgroupMemory::Evict(uint64_t page, uint32_t cpu, ReclaimResult* r) {
  if (slot_[page] != kNoSlot) {
    ++r->clean_dropped;
  } else {
    std::optional<uint64_t> s = space_.slots().GetSwapPage(cpu);
    if (!s) return false;
    slot_[page] = *s;
    ++slots_held_;
    space_.SetOwner(*s, {id_, page});
    r->writes.push_back({id_, page, *s});
  }
  lru_.Remove(page);
  state_[page] = static_cast<uint8_t>(PageState::kSwapped);
  dirty_[page] = mapped_[page] = ra_mark_[page] = false;
  return true;
}

ReclaimResult CgroupMemory::Reclaim(uint32_t cpu, uint64_t pages) {
  ReclaimResult r;
  for (uint64_t i = 0; i < pages && !lru_.empty(); ++i) {
    uint64_t victim = lru_.Lru();
    if (!Evict(victim, cpu, &r)) {  // swap full: keep it, try the next one
      ++r.no_slot;
      lru_.Touch(victim);
    }
  }
  return r;
}

void CgroupMemory::Unmap(uint64_t first, uint64_t n, uint32_t cpu) {
  for (uint64_t p = first; p < first + n && p < spec_.pages; ++p) {
    if (slot_[p] != kNoSlot) FreeSlot(p, cpu);
    if (lru_.Contains(p)) lru_.Remove(p);
    state_[p] = static_cast<uint8_t>(PageState::kNone);
    dirty_[p] = mapped_[p] = ra_mark_[p] = false;
  }
}

}  // namespace dmb::apps::swap

#include "apps/swap/swap_space.h"

#include <stdexcept>

namespace dmb::apps::swap {

SwapSpace::SwapSpace(const SwapSpaceSpec& spec)
    : map_(spec.area),
      slots_(map_, spec.slot_cache),
      readahead_(spec.page_cluster),
      owner_cg_(spec.area.pages, kNoOwner),
      owner_page_(spec.area.pages, 0) {}

uint32_t SwapSpace::Attach(CgroupMemory* cg) {
  cgroups_.push_back(cg);
  return static_cast<uint32_t>(cgroups_.size() - 1);
}

void SwapSpace::SetOwner(uint64_t slot, SlotOwner o) {
  if (owner_cg_[slot] != kNoOwner) throw std::logic_error("swap slot already holds a page");
  owner_cg_[slot] = o.cgroup;
  owner_page_[slot] = o.page;
}

std::optional<SlotOwner> SwapSpace::OwnerOf(uint64_t slot) const {
  if (owner_cg_[slot] == kNoOwner) return std::nullopt;
  return SlotOwner{owner_cg_[slot], owner_page_[slot]};
}

}  // namespace dmb::apps::swap

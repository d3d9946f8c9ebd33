// PageLru: an exact LRU list over page indices 0..n-1 (intrusive, O(1)).
//
// The paging model keeps one per cgroup, standing in for the kernel's
// active/inactive lists: a touch moves a page to the most-recent end, reclaim
// takes pages from the least-recent end.
//
// Contract: PushMru only for a page not in the list; Touch/Remove only for a
// page in it; Lru() only when not empty.
#pragma once

#include <cstdint>
#include <vector>

namespace dmb::apps::swap {

class PageLru {
 public:
  explicit PageLru(uint64_t pages) : prev_(pages, kNil), next_(pages, kNil), in_(pages, false) {}

  void PushMru(uint64_t p) {
    in_[p] = true;
    prev_[p] = mru_;
    next_[p] = kNil;
    if (mru_ != kNil) next_[mru_] = p;
    mru_ = p;
    if (lru_ == kNil) lru_ = p;
    ++size_;
  }
  void Remove(uint64_t p) {
    in_[p] = false;
    if (prev_[p] != kNil)
      next_[prev_[p]] = next_[p];
    else
      lru_ = next_[p];
    if (next_[p] != kNil)
      prev_[next_[p]] = prev_[p];
    else
      mru_ = prev_[p];
    --size_;
  }
  void Touch(uint64_t p) {
    if (mru_ == p) return;
    Remove(p);
    PushMru(p);
  }
  bool Contains(uint64_t p) const { return in_[p]; }
  uint64_t Lru() const { return lru_; }
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  static constexpr uint64_t kNil = ~uint64_t{0};
  std::vector<uint64_t> prev_, next_;
  std::vector<bool> in_;
  uint64_t lru_ = kNil, mru_ = kNil, size_ = 0;
};

}  // namespace dmb::apps::swap

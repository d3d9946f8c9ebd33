// LaneSlots: who may use one lane of a pager group, and with which buffer.
//
// A lane is one RC QP: it keeps several WRs in flight and completes them in
// order (Fastswap posts a readahead window's READs at once on its async QP).
// The pager lets up to `depth` 4 KB I/Os be outstanding on a lane, each in a
// buffer of its own:
//  - Acquire(): one of the `depth` page buffers at `buffer_addr` (+ i x 4 KB);
//    waits while all are in use, and while an exclusive user holds the lane
//    or waits for it (it is not starved by a stream of I/Os);
//  - Release(buffer): the I/O has completed;
//  - LockExclusive() / UnlockExclusive(): the lane alone, for an approach
//    whose Alloc/Free runs on lane 0 (caps.control_on_lane0): waits until no
//    I/O is in flight. Exclusive users take turns in arrival order.
// depth 1 is one operation at a time: the lane as a mutex.
//
// Contract: one node, cooperative scheduling (coroutines of one runtime).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "apps/swap/trace.h"
#include "systems/common/wait_list.h"

namespace dmb::apps::swap {

class LaneSlots {
 public:
  LaneSlots(uint64_t buffer_addr, uint32_t depth) : depth_(depth) {
    if (depth == 0) throw std::invalid_argument("a lane needs a depth of at least 1");
    for (uint32_t i = depth; i-- > 0;) free_.push_back(buffer_addr + i * kPageBytes);
  }
  LaneSlots(const LaneSlots&) = delete;
  LaneSlots& operator=(const LaneSlots&) = delete;

  Task<uint64_t> Acquire() {
    while (free_.empty() || exclusive_ || exclusive_waiting_ > 0) co_await changed_.Wait();
    const uint64_t buffer = free_.back();
    free_.pop_back();
    co_return buffer;
  }
  void Release(uint64_t buffer) {
    free_.push_back(buffer);
    changed_.NotifyAll();
  }
  Task<void> LockExclusive() {
    ++exclusive_waiting_;
    while (exclusive_ || free_.size() < depth_) co_await changed_.Wait();
    --exclusive_waiting_;
    exclusive_ = true;
  }
  void UnlockExclusive() {
    exclusive_ = false;
    changed_.NotifyAll();
  }

  uint32_t depth() const { return depth_; }
  uint32_t in_flight() const { return depth_ - static_cast<uint32_t>(free_.size()); }

 private:
  uint32_t depth_;
  std::vector<uint64_t> free_;  // page buffers not in use (a stack: the last freed first)
  bool exclusive_ = false;
  uint32_t exclusive_waiting_ = 0;
  systems::WaitList changed_;
};

}  // namespace dmb::apps::swap

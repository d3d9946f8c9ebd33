// The simulator's pending events, popped in (time, sequence) order.
//
// Contract:
//  - Pop returns the pending event with the smallest time; among equal times,
//    the one pushed first. So the order is exactly that of a binary heap on
//    (t, seq) with seq = push count, which is what the trace hashes of the
//    committed reference runs were made with.
//  - At most 2^24 events pending in the heap at once and 2^40 heap pushes
//    over the queue's life; Push throws std::length_error past either (a
//    runaway model, not a use case: the figures keep a few thousand
//    pending). Events pushed for the current instant go to the FIFO below,
//    which neither limit counts.
//
// Why not std::push_heap/pop_heap on the events themselves (issue 18): at
// 288 QPs x 24 outstanding about 7,000 events are pending and Pop was 41% of
// the simulator's time (perf). Here the heap holds 16-byte keys only (time,
// and the sequence number and payload slot packed in one word), four
// children per node (half the depth; a node's children are 64 bytes, on one
// or two cache lines: the array is not line-aligned, and aligning it showed
// no difference beyond this machine's noise at 288 x 24 or 6,912 x 4), and
// the payloads stay put in a slab of reused slots. Events pushed
// for the instant of the last Pop (a tenth of a swap run's events) skip the
// heap: a FIFO keeps them, and they come out in push order after the heap's
// events of that instant, which were all pushed before it (issue 18).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/time.h"

namespace dmb::sim {

class EventQueue {
 public:
  using EventFn = void (*)(void* ctx, uint64_t arg);
  struct Event {
    Ps t = 0;
    EventFn fn = nullptr;
    void* ctx = nullptr;
    uint64_t arg = 0;
    uint32_t kind = 0;
  };

  EventQueue();
  void Push(const Event& e);
  // Precondition: !empty().
  Event Pop();
  bool empty() const { return heap_.empty() && now_head_ == now_.size(); }
  size_t size() const { return heap_.size() + (now_.size() - now_head_); }
  // Precondition: !empty().
  Ps min_time() const {
    if (now_head_ == now_.size()) return heap_.front().t;
    return heap_.empty() || heap_.front().t > cur_ ? cur_ : heap_.front().t;
  }
  void Clear();

 private:
  static constexpr int kSlotBits = 24;
  static constexpr uint64_t kSlotMask = (1ull << kSlotBits) - 1;
  struct Key {
    Ps t;
    uint64_t seq_slot;  // seq << kSlotBits | slot: orders equal times by seq
    bool operator<(const Key& o) const { return t != o.t ? t < o.t : seq_slot < o.seq_slot; }
  };
  struct Payload {
    EventFn fn;
    void* ctx;
    uint64_t arg;
    uint32_t kind;
  };
  void SiftUp(size_t i, Key k);
  void SiftDown(Key k);
  Event PopHeap();

  uint64_t seq_ = 0;
  std::vector<Key> heap_;  // 4-ary min-heap: the children of i are 4i+1 .. 4i+4
  std::vector<Payload> slots_;
  std::vector<uint32_t> free_;  // slots not holding a pending event
  Ps cur_ = 0;                  // the latest time popped
  std::vector<Payload> now_;    // pushed for cur_ since it was reached: [now_head_, end)
  size_t now_head_ = 0;
};

}  // namespace dmb::sim

#include "fabric/sim/event_queue.h"

#include <stdexcept>

namespace dmb::sim {

EventQueue::EventQueue() {
  heap_.reserve(1024);
  slots_.reserve(1024);
  free_.reserve(1024);
}

void EventQueue::Push(const Event& e) {
  if (e.t == cur_) {
    now_.push_back(Payload{e.fn, e.ctx, e.arg, e.kind});
    return;
  }
  if (seq_ >> (64 - kSlotBits)) throw std::length_error("EventQueue: 2^40 pushes");
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
    slots_[slot] = Payload{e.fn, e.ctx, e.arg, e.kind};
  } else {
    if (slots_.size() > kSlotMask) throw std::length_error("EventQueue: 2^24 pending events");
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(Payload{e.fn, e.ctx, e.arg, e.kind});
  }
  heap_.emplace_back();
  SiftUp(heap_.size() - 1, Key{e.t, seq_++ << kSlotBits | slot});
}

EventQueue::Event EventQueue::Pop() {
  if (now_head_ != now_.size() && (heap_.empty() || heap_.front().t > cur_)) {
    const Payload p = now_[now_head_++];
    if (now_head_ == now_.size()) {
      now_.clear();
      now_head_ = 0;
    }
    return Event{cur_, p.fn, p.ctx, p.arg, p.kind};
  }
  return PopHeap();
}

EventQueue::Event EventQueue::PopHeap() {
  const Key top = heap_.front();
  const Key last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(last);
  const uint32_t slot = static_cast<uint32_t>(top.seq_slot & kSlotMask);
  const Payload& p = slots_[slot];
  free_.push_back(slot);
  if (top.t > cur_) cur_ = top.t;
  return Event{top.t, p.fn, p.ctx, p.arg, p.kind};
}

void EventQueue::Clear() {
  heap_.clear();
  slots_.clear();
  free_.clear();
  now_.clear();
  now_head_ = 0;
}

void EventQueue::SiftUp(size_t i, Key k) {
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (!(k < heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = k;
}

// Places `k` (the former last key) from the root down.
void EventQueue::SiftDown(Key k) {
  const size_t n = heap_.size();
  size_t i = 0;
  for (;;) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    size_t best = first;
    const size_t end = first + 4 < n ? first + 4 : n;
    for (size_t c = first + 1; c < end; ++c) {
      if (heap_[c] < heap_[best]) best = c;
    }
    if (!(heap_[best] < k)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = k;
}

}  // namespace dmb::sim

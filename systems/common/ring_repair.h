// RingRepair: the MN CPU's side of a free queue that WR chains run on the
// MN's RNIC (OneSidedMW's free-MW queue, ODRP's free page queue). Both queues
// are the same structure: a ring of 8-byte BIG-ENDIAN elements (0 = empty),
// head and tail as host-LE element ADDRESSES advanced by masked FAA +8 so
// they wrap inside the aligned ring, a dequeue that zeroes the element it
// took, an enqueue that FAAs the tail and writes the claimed element.
//
// What the chains cannot do alone ([OSMW] §4.3, [ODRP] §4.3): a dequeue from
// an empty queue still advances the head. It claims a "dead position" p (its
// element was 0, the chain faults on it), and the next enqueue then writes
// its element into p, behind the head, where no dequeue looks until the head
// laps the ring. The MN CPU learns of the fault (AddDeadPosition) and, once
// an enqueue has filled p, moves that element to the tail (Sweep): masked FAA
// on the tail through the RNIC (never a CPU atomic: RNIC and CPU atomics are
// not atomic with each other), then a store into the claimed element. If the
// new position is itself dead (a dequeue raced past it while empty), the
// element moves again on a later Sweep; each dead position is filled and
// moved once, so the repair converges, nothing is lost and nothing is
// handed out twice: a dead position is behind the head, and no dequeue
// reaches it again before the head laps the ring (ring_slots dequeues,
// while the CNs have been told to stop allocating).
//
// Costs: every WR the MN CPU posts is verbs.post_send; the per-element scan
// work is mn.bookkeeping. Only the empty-queue path and crash reclamation
// use it: never an allocation or a free.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "fabric/node.h"

namespace dmb::systems {

struct RingRef {
  fabric::Cluster* cluster = nullptr;
  fabric::Node* node = nullptr;  // the MN
  fabric::Mr* mr = nullptr;      // covers ring, head and tail; remote atomic + write
  uint64_t ring_addr = 0;        // aligned to ring_bytes
  uint64_t ring_bytes = 0;       // power of two
  uint64_t head_addr = 0;
  uint64_t tail_addr = 0;
};

class RingRepair {
 public:
  // Creates the MN CPU's loopback QP in the ring MR's PD (not cross-channel:
  // it holds no offloaded work) and registers its scratch word. Calls on one
  // RingRepair must not overlap (one MN CPU task drives it).
  static Task<std::unique_ptr<RingRepair>> Create(RingRef ring);

  // A dequeue claimed the element at `pos` and found it 0.
  void AddDeadPosition(uint64_t pos) { dead_.push_back(pos); }
  size_t dead_positions() const { return dead_.size(); }

  // Enqueues `element` (the BE value a dequeue hands out, e.g. an entry or
  // page address) at the tail as a free chain does. Returns the position.
  Task<uint64_t> Enqueue(uint64_t element);
  // Completes an enqueue that claimed `pos` (its tail FAA ran) but never
  // wrote it (a free chain stopped in between): stores `element` there. If
  // a dequeue already passed `pos` (a dead position), Sweep moves it on.
  Task<void> Fill(uint64_t pos, uint64_t element);
  // Moves every element an enqueue has put into a dead position to the tail.
  // Returns how many moved.
  Task<uint64_t> Sweep();
  // The element the next dequeue takes is present (not 0): allocations can
  // succeed again. (A dead position no enqueue ever fills, e.g. a hole a
  // replayed enqueue left, needs nothing: the head is already past it.)
  bool HeadHasElement() const;

  // MN CPU reads of the ring (tests, reclamation).
  uint64_t LoadElementAt(uint64_t pos) const;  // the BE element as a value
  uint64_t head() const { return ring_.node->memory().LoadU64(ring_.head_addr); }
  uint64_t tail() const { return ring_.node->memory().LoadU64(ring_.tail_addr); }

 private:
  RingRepair() = default;
  Task<fabric::WorkCompletion> Exec(fabric::SendWr wr);

  RingRef ring_;
  fabric::Cq* cq_ = nullptr;
  fabric::Qp* qp_ = nullptr;
  uint64_t scratch_ = 0;  // FAA results land here
  fabric::Mr* scratch_mr_ = nullptr;
  std::vector<uint64_t> dead_;
  fabric::CpuCost cost_post_;
  fabric::CpuCost cost_bookkeeping_;
};

}  // namespace dmb::systems

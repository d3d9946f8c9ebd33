// ODRP's metadata in MN memory. [ODRP] (docs/references.md) §4.1
// (free page queue, per-CN translation table), §4.2 (masked FAA, EndianSwap).
//
// Endianness (fabric/wqe_layout.h): everything a WR chain copies into a WQE
// field is stored BIG-ENDIAN, exactly as that field, so a READ drops it in
// verbatim: ring elements (page addresses) and TT entries (page addresses).
// Words RDMA atomics update are host LITTLE-ENDIAN: the ring's head and tail.
//
// Memory on the MN (all in one PD; every MR below is a separate registration,
// and which rkey a chain WQE carries is fixed when the MN CPU posts it):
//
//   page pool   pages x 4 KB, 4 KB aligned. Never at address 0 (the sim keeps
//               page 0 unused), so page address 0 means "none".
//               MR "pool": local write, remote read/write.
//
//   metadata    aligned to ring_bytes:
//     +0              free page ring: ring_slots x 8 B elements
//     +ring_bytes     head  u64 LE: ADDRESS of the next element to dequeue
//     +ring_bytes+8   tail  u64 LE: ADDRESS of the next element to enqueue into
//     +ring_bytes+64  zero  8 B that stay 0 (the source of "zero the element")
//               MR "meta": local write, remote read/write/atomic. Only the MN's
//               loopback worker QPs reach it: they are connected to themselves
//               and a CN-facing QP has no remote access at all.
//
//   TT of CN c  entries x 8 B, entry i = page address (BE) backing swap page i
//               of that CN, 0 = unmapped. MR "tt[c]" (local write, remote
//               read/write/atomic): its own registration, and only CN c's
//               chains carry its rkey, so a tt_addr outside CN c's table
//               fails the bounds check (REM_ACCESS_ERR) instead of touching
//               another CN's table ([ODRP] §4.5.2 (2)).
//
// Free page queue ([ODRP] §4.1, Figure 4).
//   element  u64 BE = address of a free page; 0 = empty. A dequeue zeroes the
//            element it took ([ODRP] §4.3 "we clear the allocated queue
//            element"), so a dequeue that runs past the last free page reads 0
//            and the chain faults on the null page address (empty-queue
//            detection); head == tail means nothing by itself.
//   head     dequeue: masked FAA head += 8. The FAA returns the old head, i.e.
//            the address of the claimed element, so the chain needs no
//            arithmetic, only an EndianSwap of that address into a WQE.
//   tail     enqueue (free): masked FAA tail += 8, then WRITE the page address
//            into the returned element (the Invalidate chain: V5 and V8).
//   Modulo ([ODRP] §4.2 "the modulo WR"): the metadata region is aligned to
//   ring_bytes (a power of two), so the ring offset is the low log2(ring_bytes)
//   bits of head/tail. The masked FAA (mlx5 extended atomics,
//   Opcode::kMaskedFetchAndAdd) takes a field-boundary mask in its `swap`
//   operand: a set bit i means "no carry out of bit i". BoundaryMask() sets
//   bit log2(ring_bytes) - 1, so adding 8 to the last element's address wraps
//   the offset to 0 and leaves the ring base bits alone
//   (fabric/sim/rnic.cc MaskedAdd; verbs_test MaskedFetchAndAddWrapsInsideItsField).
//
// Swap addresses ([ODRP] §4.3, §4.4): the CN computes the TT entry address
// itself, tt_addr = tt_base + (swap_addr / 4096) * 8 (the paper writes
// tt_base + swap_addr / PAGE_SIZE, counting in entries), and passes it as the
// chain argument, so no chain WR does address arithmetic.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dmb::systems::odrp {

inline constexpr uint64_t kPageBytes = 4096;  // fixed I/O size ([ODRP] §3)
inline constexpr uint64_t kElementBytes = 8;
inline constexpr uint64_t kTtEntryBytes = 8;

struct MnLayout {
  uint64_t pages = 0;
  uint64_t ring_slots = 0;  // bit_ceil(pages), >= 2
  uint64_t ring_bytes = 0;
  static constexpr uint64_t kHeadOff = 0;  // relative to ring_bytes
  static constexpr uint64_t kTailOff = 8;
  static constexpr uint64_t kZeroOff = 64;
  static constexpr uint64_t kTrailerBytes = 128;

  static MnLayout ForPages(uint64_t pages) {
    if (pages == 0) throw std::invalid_argument("odrp: the page pool needs at least one page");
    MnLayout l;
    l.pages = pages;
    l.ring_slots = std::bit_ceil(std::max<uint64_t>(2, pages));
    l.ring_bytes = l.ring_slots * kElementBytes;
    return l;
  }
  uint64_t meta_bytes() const { return ring_bytes + kTrailerBytes; }
  uint64_t meta_align() const { return std::max<uint64_t>(ring_bytes, 64); }
  uint64_t head_off() const { return ring_bytes + kHeadOff; }
  uint64_t tail_off() const { return ring_bytes + kTailOff; }
  uint64_t zero_off() const { return ring_bytes + kZeroOff; }
  uint64_t element_off(uint64_t slot) const { return slot * kElementBytes; }
  // Masked-FAA field boundary: no carry out of the ring-offset bits.
  uint64_t BoundaryMask() const { return ring_bytes >> 1; }
  // What the masked FAA computes for `value` advanced by n elements (MN CPU
  // and tests).
  uint64_t Advance(uint64_t value, uint64_t n) const {
    const uint64_t mask = ring_bytes - 1;
    return (value & ~mask) | ((value + n * kElementBytes) & mask);
  }
};

// The address of swap page `swap_addr`'s TT entry (CN side).
inline uint64_t TtEntryAddr(uint64_t tt_base, uint64_t swap_addr) {
  return tt_base + (swap_addr / kPageBytes) * kTtEntryBytes;
}

}  // namespace dmb::systems::odrp

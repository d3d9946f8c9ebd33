// OneSidedMW's metadata in MN memory and the wire formats of the allocation
// chain. [OSMW] §3.1, §4.1-4.3 (docs/references.md).
//
// Everything a WR chain copies into a WQE is stored BIG-ENDIAN, exactly as the
// WQE field it lands in (fabric/wqe_layout.h), so a RECV scatter or a READ
// drops it in verbatim. Counters that RDMA atomics update are host
// LITTLE-ENDIAN (the atomic unit adds in host order).
//
// Metadata region (one MR in a PD of its own, the "metadata PD": remote
// read/write/atomic, but no CN-facing QP is in that PD, so no CN can reach it
// whatever rkey it guesses; only the MN's chain loopback QPs can):
//
//   +0                 free-MW queue ring: ring_slots x 8 B elements
//   +ring_bytes        head (u64 LE), +8 tail (u64 LE), padded to 64 B
//   +ring_bytes + 64   MWTable: entries x entry_stride
//
// The region is aligned to ring_bytes (ring_slots is a power of two, >= 2).
// ring_slots holds every entry plus `dead_slots` dead positions (rounded up to
// a power of two): the claims allocation chains make past the tail while the
// queue runs dry (RingRepair; up to one per chain lane in flight before the
// CNs are told to stop), so an element the MN moves to the tail never lands
// on a position the head has not passed. OsmwMn reserves as many as entries.
//
// Free-MW queue ([OSMW] §3.1 "circular-buffer-based queue").
//   element:  u64 BE = address of an MWTable entry; 0 = empty (never an entry
//             address: the table does not start at address 0).
//   head:     u64 LE = ADDRESS of the next element to allocate (not an index).
//   tail:     u64 LE = address of the next element a free fills.
//   "Modulo" is done by the atomic unit: the allocation chain advances the
//   head with a MASKED fetch-and-add of +8 whose field boundary is bit
//   log2(ring_bytes) - 1 (HeadBoundaryMask), so the carry out of the ring
//   offset is dropped and the head wraps from the last element to the first
//   while the ring base bits never change. The FAA returns the address of the
//   element it claimed, so the chain needs no arithmetic: it only byte-swaps
//   that address (a READ with eight reversed 1-byte SGEs, ODRP's EndianSwap)
//   into the WQEs that READ and zero the element. The paper says only "FAA on
//   the queue head" and leaves the wrap open; this is our choice. The free
//   chain (free_chain.h) advances the tail the same way.
//   The head keeps no lap count: head == tail means nothing by itself; an
//   empty queue is detected by the zeroed element ([OSMW] §4.3).
//
// MWTable entry ([OSMW] §3.1, §4.1 "each entry ... stores the base address
// of the associated memory chunk, along with the rkeys for all MWs within the
// MW group"; §4.3 owner_id), G = group size:
//
//   off        size  field
//   0          8     owner_ptr   BE: address of this entry's owner_id word
//                                (constant; the chain READs it into the WRITE
//                                that records the owner)
//   8          8     handle      BE: this entry's address (constant; returned
//                                to the CN as the argument of a later free)
//   16 + 16k   16    mw[k]       { base BE u64, rkey BE u32, next_rkey BE u32 }
//                                = bytes 16..31 of a BIND_MW WQE (window
//                                address, current MW rkey, new rkey), so one
//                                READ with G 16-byte SGEs arms G binds
//   16 + 16G   8     owner_id    u64 LE: CN index + 1 of the owner; 0 = free
//   24 + 16G   8     mw0 copies  MW 0's rkey twice (BE u32 each, constant):
//                                the free chain's READ of the entry needs MW
//                                0's rkey in four WQEs and a READ scatters
//                                each byte once (free_chain.h)
//   stride = 32 + 16G rounded up to a multiple of 64.
//
//   base is repeated per MW so each record is a self-contained WQE image.
//   next_rkey == rkey in this implementation: a rebind keeps the key (type-2
//   windows are guarded by the QP they are bound to, not by the key value; the
//   paper does not rotate keys). A free chain that wants rotation writes both.
//   MW 0 of every group is bound to the requesting CN's Free QP, MW k (k >= 1)
//   to the k-th access QP the CN names ([OSMW] §4.2, Figure 4).
//
// Allocation request (the CN's SEND, scattered by the Alloc QP's RECV):
//   0    8   cn_buff address BE  -> reply WRITE WQE remote_addr
//   8    4   cn_buff rkey BE     -> reply WRITE WQE rkey
//   12   4k  access qpn k (k = 1..G-1) BE -> BIND_MW k WQE qpn field
//
// Allocation reply (the chain's WRITE_WITH_IMM into cn_buff; imm = the chain
// instance's sequence number on that Alloc QP):
//   0        8    handle BE
//   8 + 16k  16   mw[k] record as in the entry (base, rkey, installed rkey)
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fabric/wqe_layout.h"

namespace dmb::systems::onesided_mw {

inline constexpr uint64_t kElementBytes = 8;
inline constexpr uint64_t kCountersBytes = 64;  // head, tail, padding
inline constexpr uint64_t kEntryOwnerPtrOff = 0;
inline constexpr uint64_t kEntryHandleOff = 8;
inline constexpr uint64_t kEntryMwOff = 16;
inline constexpr uint64_t kMwRecordBytes = 16;
inline constexpr uint32_t kMaxGroupSize = 14;  // READ of an entry: G + 2 SGEs <= 16

inline constexpr uint64_t kNoOwner = 0;
inline constexpr uint64_t OwnerIdOfCn(uint32_t cn_index) { return uint64_t{cn_index} + 1; }

// Byte offsets inside the metadata region for a given group size and entry
// count.
struct Layout {
  uint32_t group_size = 0;
  uint32_t entries = 0;
  uint32_t ring_slots = 0;  // power of two >= max(2, entries + dead_slots)
  uint64_t ring_bytes = 0;
  uint64_t head_off = 0;
  uint64_t tail_off = 0;
  uint64_t table_off = 0;
  uint64_t entry_stride = 0;
  uint64_t total_bytes = 0;

  static Layout Make(uint32_t group_size, uint32_t entries, uint32_t dead_slots = 0) {
    if (group_size < 1 || group_size > kMaxGroupSize) {
      throw std::invalid_argument("onesided_mw: group size must be 1.." +
                                  std::to_string(kMaxGroupSize) + ", got " +
                                  std::to_string(group_size));
    }
    if (entries < 1) throw std::invalid_argument("onesided_mw: the MWTable needs >= 1 entry");
    Layout l;
    l.group_size = group_size;
    l.entries = entries;
    l.ring_slots = std::bit_ceil(std::max<uint32_t>(2, entries + dead_slots));
    l.ring_bytes = uint64_t{l.ring_slots} * kElementBytes;
    l.head_off = l.ring_bytes;
    l.tail_off = l.ring_bytes + 8;
    l.table_off = l.ring_bytes + kCountersBytes;
    l.entry_stride = (EntryReadBytes(group_size) + 16 + 63) / 64 * 64;
    l.total_bytes = l.table_off + uint64_t{entries} * l.entry_stride;
    return l;
  }
  // Alignment the region needs (the masked FAA wraps inside an aligned ring).
  uint64_t region_align() const { return std::max<uint64_t>(64, ring_bytes); }
  uint64_t entry_off(uint32_t i) const { return table_off + uint64_t{i} * entry_stride; }
  uint64_t element_off(uint32_t slot) const { return uint64_t{slot} * kElementBytes; }
  uint64_t owner_off_in_entry() const { return EntryReadBytes(group_size); }
  uint64_t mw0_copies_off_in_entry() const { return EntryReadBytes(group_size) + 8; }

  // What the allocation chain READs of an entry: everything but owner_id.
  static constexpr uint64_t EntryReadBytes(uint32_t g) { return kEntryMwOff + kMwRecordBytes * g; }
  // Masked-FAA boundary for head and tail: the carry out of bit
  // log2(ring_bytes) - 1 is dropped (bit 63 is a boundary too, harmlessly).
  uint64_t HeadBoundaryMask() const { return (ring_bytes >> 1) | (1ull << 63); }
  // The head/tail value after advancing `value` by `n` elements (what the
  // masked FAA computes), for the MN CPU and tests.
  uint64_t Advance(uint64_t value, uint64_t n, uint64_t ring_addr) const {
    return ring_addr + ((value - ring_addr + n * kElementBytes) & (ring_bytes - 1));
  }
};

// ---- Entries ---------------------------------------------------------------------

struct EntryImage {
  uint64_t owner_ptr = 0;
  uint64_t handle = 0;
  uint64_t base = 0;
  std::vector<uint32_t> rkeys;       // current MW rkeys (what the bind names)
  std::vector<uint32_t> next_rkeys;  // the rkeys the binds install
  uint64_t owner_id = kNoOwner;
};

// Writes an entry (stride bytes at `out`).
inline void EncodeEntry(const Layout& l, const EntryImage& e, uint8_t* out) {
  std::fill(out, out + l.entry_stride, uint8_t{0});
  fabric::StoreBe64(out + kEntryOwnerPtrOff, e.owner_ptr);
  fabric::StoreBe64(out + kEntryHandleOff, e.handle);
  for (uint32_t k = 0; k < l.group_size; ++k) {
    uint8_t* r = out + kEntryMwOff + kMwRecordBytes * k;
    fabric::StoreBe64(r, e.base);
    fabric::StoreBe32(r + 8, e.rkeys.at(k));
    fabric::StoreBe32(r + 12, e.next_rkeys.at(k));
  }
  std::memcpy(out + l.owner_off_in_entry(), &e.owner_id, 8);
  fabric::StoreBe32(out + l.mw0_copies_off_in_entry(), e.rkeys.at(0));
  fabric::StoreBe32(out + l.mw0_copies_off_in_entry() + 4, e.rkeys.at(0));
}

inline EntryImage DecodeEntry(const Layout& l, const uint8_t* in) {
  EntryImage e;
  e.owner_ptr = fabric::LoadBe64(in + kEntryOwnerPtrOff);
  e.handle = fabric::LoadBe64(in + kEntryHandleOff);
  e.base = fabric::LoadBe64(in + kEntryMwOff);
  for (uint32_t k = 0; k < l.group_size; ++k) {
    const uint8_t* r = in + kEntryMwOff + kMwRecordBytes * k;
    e.rkeys.push_back(fabric::LoadBe32(r + 8));
    e.next_rkeys.push_back(fabric::LoadBe32(r + 12));
  }
  std::memcpy(&e.owner_id, in + l.owner_off_in_entry(), 8);
  return e;
}

// ---- Request and reply ----------------------------------------------------------

inline constexpr uint32_t RequestBytes(uint32_t g) { return 12 + 4 * (g - 1); }
inline constexpr uint32_t ReplyBytes(uint32_t g) { return 8 + kMwRecordBytes * g; }
// Offsets in the request (what each RECV SGE picks up).
inline constexpr uint32_t kReqCnBuffOff = 0;  // 12 B: address + rkey
inline constexpr uint32_t ReqQpnOff(uint32_t k) { return 12 + 4 * (k - 1); }  // k >= 1

inline std::vector<uint8_t> EncodeRequest(uint64_t cn_buff, uint32_t cn_rkey,
                                          const std::vector<uint32_t>& access_qpns) {
  std::vector<uint8_t> b(RequestBytes(static_cast<uint32_t>(access_qpns.size()) + 1));
  fabric::StoreBe64(b.data(), cn_buff);
  fabric::StoreBe32(b.data() + 8, cn_rkey);
  for (size_t k = 0; k < access_qpns.size(); ++k) {
    fabric::StoreBe32(b.data() + ReqQpnOff(static_cast<uint32_t>(k + 1)), access_qpns[k]);
  }
  return b;
}

struct ReplyImage {
  uint64_t handle = 0;
  uint64_t base = 0;                // of MW 0; every record names the same chunk
  bool same_base = true;            // all records agree on the base
  std::vector<uint32_t> rkeys;      // the rkeys the binds installed (next_rkey)
  std::vector<uint32_t> old_rkeys;  // what the binds named
};

inline ReplyImage DecodeReply(uint32_t g, const uint8_t* in) {
  ReplyImage r;
  r.handle = fabric::LoadBe64(in);
  for (uint32_t k = 0; k < g; ++k) {
    const uint8_t* rec = in + 8 + kMwRecordBytes * k;
    const uint64_t base = fabric::LoadBe64(rec);
    if (k == 0) r.base = base;
    r.same_base = r.same_base && base == r.base;
    r.old_rkeys.push_back(fabric::LoadBe32(rec + 8));
    r.rkeys.push_back(fabric::LoadBe32(rec + 12));
  }
  return r;
}

}  // namespace dmb::systems::onesided_mw

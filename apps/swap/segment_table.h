// SegmentTable: which parts of one CN's swap area are backed by MN memory.
//
// The swap area (slots 0..area_slots-1, 4 KB each) is cut into segments of
// `segment_slots` slots, address-aligned: slot s lies in segment
// s / segment_slots at byte offset (s % segment_slots) * 4 KB. A segment is
// one chunk of the approach (OneSidedMW, RPC-MW and Fine-MR 1 MB, Static-MR
// its coarse region, ODRP one 4 KB page).
//
// Counting (no time, no fabric; the pager turns the answers into Alloc and
// Free calls):
//   Store(s)   a page's copy goes to slot s: the segment's count goes up;
//              true when the segment is not mapped yet (the pager must
//              allocate it before the WRITE).
//   Release(s) slot s's copy is gone (frontswap_invalidate_page): the count
//              goes down; true when the segment is now empty and the policy
//              gives empty segments back.
// Policies (how a coarse approach covers the area, which no paper documents):
//   kLazy   mapped on first store, freed when its last copy goes;
//   kKeep   mapped on first store, never freed;
//   kWhole  every segment mapped at start, never freed.
//
// Utilization = stored bytes in mapped segments / mapped bytes, the quantity OneSidedMW §6.2.1
// averages over the run ("actually used MN memory to allocated MN memory").
//
// Contract: slot < area_slots; Store only on a slot holding nothing, Release
// only on one holding a copy (checked: std::logic_error names the slot).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dmb::apps::swap {

enum class SegmentPolicy : uint8_t { kLazy, kKeep, kWhole };
// "lazy" | "keep" | "whole"; throws std::invalid_argument naming the choices.
SegmentPolicy ParseSegmentPolicy(const std::string& s);

class SegmentTable {
 public:
  SegmentTable(uint64_t area_slots, uint64_t segment_slots, SegmentPolicy policy);

  uint64_t segments() const { return stored_.size(); }
  uint64_t segment_slots() const { return segment_slots_; }
  SegmentPolicy policy() const { return policy_; }
  uint64_t SegmentOf(uint64_t slot) const { return slot / segment_slots_; }
  uint64_t OffsetBytes(uint64_t slot) const;

  bool Store(uint64_t slot);
  bool Release(uint64_t slot);
  void MarkMapped(uint64_t seg, bool mapped);

  bool holds(uint64_t slot) const { return holds_[slot]; }
  bool mapped(uint64_t seg) const { return mapped_[seg]; }
  uint64_t stored(uint64_t seg) const { return stored_[seg]; }
  uint64_t stored_slots() const { return stored_total_; }
  // Copies in mapped segments (a copy whose segment is still being
  // allocated is not in MN memory yet).
  uint64_t stored_mapped_slots() const { return stored_mapped_; }
  uint64_t mapped_segments() const { return mapped_total_; }

 private:
  uint64_t segment_slots_;
  SegmentPolicy policy_;
  std::vector<bool> holds_;
  std::vector<uint32_t> stored_;
  std::vector<bool> mapped_;
  uint64_t stored_total_ = 0;
  uint64_t stored_mapped_ = 0;
  uint64_t mapped_total_ = 0;
};

}  // namespace dmb::apps::swap

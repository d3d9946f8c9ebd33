#include "apps/swap/segment_table.h"

#include <stdexcept>

#include "apps/swap/trace.h"

namespace dmb::apps::swap {

SegmentPolicy ParseSegmentPolicy(const std::string& s) {
  if (s == "lazy") return SegmentPolicy::kLazy;
  if (s == "keep") return SegmentPolicy::kKeep;
  if (s == "whole") return SegmentPolicy::kWhole;
  throw std::invalid_argument("segment policy \"" + s + "\": expected lazy, keep or whole");
}

SegmentTable::SegmentTable(uint64_t area_slots, uint64_t segment_slots, SegmentPolicy policy)
    : segment_slots_(segment_slots), policy_(policy), holds_(area_slots, false) {
  if (segment_slots == 0 || area_slots == 0) {
    throw std::invalid_argument("segment table: area and segment need at least one slot");
  }
  const uint64_t n = (area_slots + segment_slots - 1) / segment_slots;
  stored_.assign(n, 0);
  mapped_.assign(n, false);
}

uint64_t SegmentTable::OffsetBytes(uint64_t slot) const {
  return slot % segment_slots_ * kPageBytes;
}

bool SegmentTable::Store(uint64_t slot) {
  if (holds_.at(slot)) {
    throw std::logic_error("segment table: slot " + std::to_string(slot) + " already holds a copy");
  }
  holds_[slot] = true;
  ++stored_total_;
  const uint64_t seg = SegmentOf(slot);
  ++stored_[seg];
  if (mapped_[seg]) ++stored_mapped_;
  return !mapped_[seg];
}

bool SegmentTable::Release(uint64_t slot) {
  if (!holds_.at(slot)) {
    throw std::logic_error("segment table: slot " + std::to_string(slot) + " holds no copy");
  }
  holds_[slot] = false;
  --stored_total_;
  const uint64_t seg = SegmentOf(slot);
  if (mapped_[seg]) --stored_mapped_;
  return --stored_[seg] == 0 && policy_ == SegmentPolicy::kLazy && mapped_[seg];
}

void SegmentTable::MarkMapped(uint64_t seg, bool mapped) {
  if (mapped_.at(seg) == mapped) return;
  mapped_[seg] = mapped;
  if (mapped) {
    ++mapped_total_;
    stored_mapped_ += stored_[seg];
  } else {
    --mapped_total_;
    stored_mapped_ -= stored_[seg];
  }
}

}  // namespace dmb::apps::swap

// ChunkTable: the MN's record of fixed-size chunks in the pool and who owns
// them. Free chunks are reused last-freed-first (a free list), which is also
// what lets the rkey-enumeration attack find a reused chunk.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace dmb::systems {

class ChunkTable {
 public:
  static constexpr int32_t kFree = -1;
  static constexpr int32_t kPending = -2;  // freed, waiting for revocation to finish

  void Init(uint64_t base, uint64_t chunk_bytes, uint64_t count) {
    base_ = base;
    chunk_bytes_ = chunk_bytes;
    owner_.assign(count, kFree);
    free_.clear();
    for (uint64_t i = count; i-- > 0;) free_.push_back(i);
  }
  std::optional<uint64_t> Take(uint32_t cn) {
    if (free_.empty()) return std::nullopt;
    const uint64_t i = free_.back();
    free_.pop_back();
    owner_[i] = static_cast<int32_t>(cn);
    ++in_use_;
    return i;
  }
  bool OwnedBy(uint64_t i, uint32_t cn) const {
    return i < owner_.size() && owner_[i] == static_cast<int32_t>(cn);
  }
  // Held by some CN (not free, not pending).
  bool Owned(uint64_t i) const { return i < owner_.size() && owner_[i] >= 0; }
  // Owned -> pending: no longer the CN's, not yet reusable (revocation runs).
  void MarkPending(uint64_t i) {
    owner_[i] = kPending;
    --in_use_;
    ++pending_;
  }
  // Owned or pending -> free.
  void Release(uint64_t i) {
    if (owner_[i] == kPending) {
      --pending_;
    } else {
      --in_use_;
    }
    owner_[i] = kFree;
    free_.push_back(i);
  }
  std::vector<uint64_t> OwnedByCn(uint32_t cn) const {
    std::vector<uint64_t> out;
    for (uint64_t i = 0; i < owner_.size(); ++i) {
      if (owner_[i] == static_cast<int32_t>(cn)) out.push_back(i);
    }
    return out;
  }
  bool IsPending(uint64_t i) const { return owner_[i] == kPending; }
  uint64_t addr(uint64_t i) const { return base_ + i * chunk_bytes_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t count() const { return owner_.size(); }
  uint64_t in_use() const { return in_use_; }  // held by a CN
  uint64_t pending() const { return pending_; }
  uint64_t free_count() const { return free_.size(); }

 private:
  uint64_t base_ = 0;
  uint64_t chunk_bytes_ = 0;
  std::vector<int32_t> owner_;
  std::vector<uint64_t> free_;
  uint64_t in_use_ = 0;
  uint64_t pending_ = 0;
};

}  // namespace dmb::systems

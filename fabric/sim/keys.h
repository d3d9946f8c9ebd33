// The simulated RNIC's protection objects (PD, MR, MW) and its key table.
//
// KeyTable is what an mlx5 NIC calls the memory protection table (MPT): key
// index -> the MR or the MW that holds it. A window lives inside its entry,
// so a remote access check reads one entry rather than the table and then a
// window kept elsewhere. At a million windows the table is tens of MB and
// each of those two reads was a host cache miss: CheckRemote was 7% of
// figure 6 at a million keys (perf, issue 18), over half of it the window.
//
// Contract:
//  - Index 0 is reserved (an rkey of index 0 is never valid); Add() hands out
//    1, 2, ... and throws VerbsError(ENOMEM) at max_keys (2^24).
//  - Entries never move and are never reused, so a SimMw* stays valid for
//    the table's life (it says allocated_ = false once deallocated).
//  - Find(idx) is null for an index never handed out; an entry's `mr` is
//    null unless a registered MR holds it, LiveMw() unless an allocated
//    window does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/node.h"

namespace dmb::sim {

class SimNode;

class SimPd : public fabric::Pd {
 public:
  SimPd(SimNode* node, uint32_t handle) : node_(node), handle_(handle) {}
  uint32_t handle() const override { return handle_; }
  SimNode* node() const { return node_; }

 private:
  SimNode* node_;
  uint32_t handle_;
};

class SimMr : public fabric::Mr {
 public:
  uint64_t addr() const override { return addr_; }
  uint64_t length() const override { return length_; }
  uint32_t lkey() const override { return key_; }
  uint32_t rkey() const override { return key_; }
  uint32_t access() const override { return access_; }
  fabric::Pd* pd() const override { return pd_; }

  SimPd* pd_ = nullptr;
  uint64_t addr_ = 0;
  uint64_t length_ = 0;
  uint32_t access_ = 0;
  uint32_t key_ = 0;
  uint32_t bound_mws_ = 0;
  bool valid_ = false;
};

// In a KeyTable entry, after its MR pointer: 56 bytes with the vtable
// pointer, so the entry is one 64-byte line.
class SimMw : public fabric::Mw {
 public:
  enum class State : uint8_t { kFree, kValid };
  fabric::MwType type() const override { return type_; }
  uint32_t rkey() const override { return (index_ << 8) | key_; }
  fabric::Pd* pd() const override { return pd_; }

  SimPd* pd_ = nullptr;
  uint64_t addr_ = 0;
  uint64_t length_ = 0;  // 0 = unbound (type-1)
  uint32_t access_ = 0;
  uint32_t qpn_ = 0;  // type-2: the only QP that may use it
  fabric::MwType type_ = fabric::MwType::kType2;
  uint8_t key_ = 0;
  State state_ = State::kFree;
  bool allocated_ = true;
  uint32_t index_ = 0;
  SimMr* mr_ = nullptr;
};

class KeyTable {
 public:
  // One host cache line: a remote check reads one line of the table.
  struct alignas(64) Entry {
    SimMr* mr = nullptr;  // the registered MR holding this index, or null
    SimMw mw;             // a window here has mw.index_ != 0 (set by AllocMw)

    SimMw* LiveMw() { return mw.index_ != 0 && mw.allocated_ ? &mw : nullptr; }
  };
  static_assert(sizeof(Entry) == 64);

  // Indexes live in the rkey's top 24 bits; tests pass a smaller limit.
  explicit KeyTable(uint32_t max_keys = 1u << 24) : max_keys_(max_keys) {}
  // The index of a new entry, all empty.
  uint32_t Add(const std::string& node_name);
  Entry* Find(uint32_t idx) {
    return idx != 0 && idx < count_ ? &chunks_[idx >> kChunkShift][idx & kChunkMask] : nullptr;
  }
  uint32_t count() const { return count_; }
  // The registered MR / the allocated window at `idx`, or null.
  SimMr* MrAt(uint32_t idx) {
    Entry* e = Find(idx);
    return e ? e->mr : nullptr;
  }
  SimMw* LiveMwAt(uint32_t idx) {
    Entry* e = Find(idx);
    return e ? e->LiveMw() : nullptr;
  }

 private:
  static constexpr int kChunkShift = 12;  // 4,096 entries a chunk: small nodes stay small
  static constexpr uint32_t kChunkMask = (1u << kChunkShift) - 1;
  std::vector<std::unique_ptr<Entry[]>> chunks_;
  uint32_t max_keys_;
  uint32_t count_ = 1;  // index 0 reserved
};

}  // namespace dmb::sim

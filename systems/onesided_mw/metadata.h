// OneSidedMW's MN metadata (layout.h): the MWTable, the free-MW queue, and the
// type-2 MW groups, set up once by the MN CPU. After Create, only WR chains on
// the MN's RNIC change it; the Load* accessors are MN CPU reads for the
// control path (empty-queue recovery, crash reclamation) and tests.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "fabric/node.h"
#include "systems/onesided_mw/layout.h"

namespace dmb::systems::onesided_mw {

struct MetadataConfig {
  uint32_t group_size = 3;      // MWs per chunk (G): MW 0 for the Free QP, G-1 access QPs
  uint32_t entries = 16;        // chunks (MWTable entries)
  uint64_t chunk_bytes = 4096;  // allocation granularity
  uint32_t dead_slots = 0;      // ring room for claims past the tail (Layout)
  // Windows allow RDMA atomics too: apps commit with CAS (RACE hashing).
  uint32_t mw_access = fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;
};

class Metadata {
 public:
  // Allocates and registers the metadata region in a new PD of its own,
  // allocates G type-2 MWs per chunk in `data_pd` (the PD of `pool_mr` and of
  // every CN-facing QP), writes the MWTable and fills the queue with every
  // entry (head at the first element). `pool_mr` needs kMwBind and
  // kLocalWrite; it should carry no remote access of its own (the windows
  // grant it). Chunk i is [pool_mr->addr() + i * chunk_bytes, +chunk_bytes).
  // Runs on the MN CPU (registration is paid here, at setup).
  static Task<std::unique_ptr<Metadata>> Create(fabric::Node* mn, fabric::Pd* data_pd,
                                                fabric::Mr* pool_mr, MetadataConfig cfg);

  const Layout& layout() const { return layout_; }
  const MetadataConfig& config() const { return cfg_; }
  uint32_t group_size() const { return layout_.group_size; }
  fabric::Node* node() const { return node_; }
  fabric::Pd* data_pd() const { return data_pd_; }
  fabric::Pd* meta_pd() const { return meta_pd_; }
  fabric::Mr* meta_mr() const { return meta_mr_; }
  fabric::Mr* pool_mr() const { return pool_mr_; }

  uint64_t region_addr() const { return base_; }
  uint64_t ring_addr() const { return base_; }
  uint64_t head_addr() const { return base_ + layout_.head_off; }
  uint64_t tail_addr() const { return base_ + layout_.tail_off; }
  uint64_t element_addr(uint32_t slot) const { return base_ + layout_.element_off(slot); }
  uint64_t entry_addr(uint32_t i) const { return base_ + layout_.entry_off(i); }
  uint64_t owner_addr(uint32_t i) const { return entry_addr(i) + layout_.owner_off_in_entry(); }
  uint64_t chunk_addr(uint32_t i) const { return pool_mr_->addr() + i * cfg_.chunk_bytes; }
  fabric::Mw* mw(uint32_t entry, uint32_t k) const { return mws_.at(entry * group_size() + k); }
  // Entry index of a handle (entry address), or -1.
  int64_t EntryOf(uint64_t handle) const;

  // MN CPU reads.
  uint64_t LoadHead() const { return node_->memory().LoadU64(head_addr()); }
  uint64_t LoadTail() const { return node_->memory().LoadU64(tail_addr()); }
  uint64_t LoadElement(uint32_t slot) const;  // the entry address it holds (0 = empty)
  EntryImage LoadEntry(uint32_t i) const;
  // MN CPU writes, for setup and tests (e.g. placing the ring at another
  // offset). Never on the allocation path.
  void StoreElement(uint32_t slot, uint64_t entry_addr);
  void StoreHead(uint64_t v) { node_->memory().StoreU64(head_addr(), v); }
  void StoreTail(uint64_t v) { node_->memory().StoreU64(tail_addr(), v); }

 private:
  Metadata() = default;

  fabric::Node* node_ = nullptr;
  fabric::Pd* data_pd_ = nullptr;
  fabric::Pd* meta_pd_ = nullptr;
  fabric::Mr* pool_mr_ = nullptr;
  fabric::Mr* meta_mr_ = nullptr;
  MetadataConfig cfg_;
  Layout layout_;
  uint64_t base_ = 0;
  std::vector<fabric::Mw*> mws_;  // entry-major: entry * G + k
};

}  // namespace dmb::systems::onesided_mw

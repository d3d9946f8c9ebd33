// SlabAllocator: the KV store's CN-side two-level allocator (FUSEE-style).
//
// Level 1: chunks of caps().granularity_bytes from MemoryManager::Alloc for
// one access group. Level 2: each chunk serves one size class and is carved
// into blocks of that class; a KV block goes into the smallest class that
// fits it. Freed blocks return to their chunk's free list; a chunk whose
// blocks are all free goes back to the MN at once (CnSide::Free).
//
// Contract: one thread uses an allocator (its group's). Size classes are
// ascending, each 8..granularity bytes (a larger class is kUnsupported: a
// block never spans chunks). Nothing here touches MN memory: blocks are
// addresses; the caller READs/WRITEs them through its lanes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "apps/kvstore/u64_map.h"
#include "systems/memory_manager.h"

namespace dmb::apps::kv {

// One chunk carved into blocks of one class.
struct Slab {
  systems::Chunk chunk;
  uint32_t size_class = 0;          // index into the allocator's classes
  uint32_t block_bytes = 0;         // the class's size
  uint32_t blocks = 0;              // chunk.bytes / block_bytes
  std::vector<uint32_t> free_list;  // block indices, the next to hand out last
  std::vector<bool> in_use;
};

// A block handed out: MN address, and where it lives.
struct Block {
  const Slab* slab = nullptr;
  uint64_t offset = 0;  // inside slab->chunk
  uint64_t addr() const { return slab->chunk.addr + offset; }
};

struct SlabStats {
  uint64_t chunks_held = 0;
  uint64_t peak_chunks_held = 0;
  uint64_t chunks_allocated = 0;  // MemoryManager::Alloc calls that succeeded
  uint64_t chunks_returned = 0;   // CnSide::Free calls that succeeded
  uint64_t blocks_in_use = 0;
  uint64_t granularity_bytes = 0;
  uint64_t bytes_held() const { return chunks_held * granularity_bytes; }
  uint64_t peak_bytes_held() const { return peak_chunks_held * granularity_bytes; }
};

class SlabAllocator {
 public:
  // Powers of two from 64 B up to min(32 KB, granularity).
  static std::vector<uint32_t> DefaultClasses(uint64_t granularity);
  // kOk, or why `classes` cannot be used with chunks of `granularity` bytes.
  static systems::Status CheckClasses(const std::vector<uint32_t>& classes, uint64_t granularity);

  // `classes` must have passed CheckClasses.
  SlabAllocator(systems::CnSide& cn, systems::AccessGroup& group, std::vector<uint32_t> classes);
  SlabAllocator(const SlabAllocator&) = delete;
  SlabAllocator& operator=(const SlabAllocator&) = delete;

  const std::vector<uint32_t>& classes() const { return classes_; }
  uint32_t max_block_bytes() const { return classes_.back(); }
  // The smallest class holding `bytes`, or -1 if none does.
  int ClassFor(uint64_t bytes) const;

  // A block of the smallest class holding `bytes`: kUnsupported if no class
  // does, or if the new chunk the MN gave is smaller than the class (the
  // chunk goes back); the MemoryManager's status if a new chunk cannot be had.
  Task<systems::Result<Block>> Alloc(uint64_t bytes);
  // Frees the block at MN address `addr`: kInvalidArgument if it is not a
  // block in use of this allocator; the MN's status if returning the then
  // empty chunk fails (the chunk is kept, its blocks free).
  Task<systems::Status> Free(uint64_t addr);
  // The in-use block at `addr`, or nullptr.
  const Slab* Find(uint64_t addr) const;
  // Returns every chunk to the MN, blocks in use or not (the store closes).
  Task<systems::Status> ReleaseAll();

  const SlabStats& stats() const { return stats_; }

 private:
  Slab* SlabOf(uint64_t addr) const;
  // The slab whose chunk starts at `chunk_addr`, or nullptr.
  Slab* SlabAt(uint64_t chunk_addr) const;
  // A slab for `chunk` of class `cls`, all its blocks free, indexed by its
  // chunk's address: a spare one reused (its vectors keep their capacity),
  // else a new one.
  Slab* MakeSlab(const systems::Chunk& chunk, uint32_t cls);
  // Moves every slab from by_quotient_ into by_addr_.
  void IndexByAddress();
  // Drops `s` from the index; it becomes a spare.
  void Forget(Slab& s);
  // The slab at `chunk_addr` if it is of class `cls` and has a free block.
  Slab* WithFreeAt(uint64_t chunk_addr, uint32_t cls) const;
  // The class's slab of lowest chunk address with a free block, or nullptr.
  Slab* FirstWithFree(uint32_t cls);
  // `s` has just got its first free block.
  void AddWithFree(const Slab& s);

  systems::CnSide& cn_;
  systems::AccessGroup& group_;
  std::vector<uint32_t> classes_;
  std::deque<Slab> store_;    // every slab ever made (stable addresses)
  std::vector<Slab*> spare_;  // those whose chunks went back
  // The slabs held, by one of two indexes. While every chunk has the
  // granularity's size, by_quotient_ finds them by chunk address /
  // granularity: chunks of one size never share that quotient, and a block
  // lies in the chunk of its own quotient or the one below (O(1), where an
  // ordered map costs a tree walk per lookup and per chunk returned: with a
  // 4 KB block per 4 KB chunk, a million of each at the paper's scale).
  // From the first chunk of another size on (irregular_), by_addr_ holds them
  // all, ordered by chunk address.
  U64Map<Slab> by_quotient_;
  std::map<uint64_t, Slab*> by_addr_;
  bool irregular_ = false;
  // Per class: a min-heap of the chunk addresses of its slabs with a free
  // block, so that a block comes from the lowest such chunk. Entries are
  // dropped lazily: one whose slab has since lost its free blocks, gone back
  // or changed class is skipped when it reaches the top (FirstWithFree), and
  // the heap is rebuilt from its live entries once it holds 2 x the slabs
  // held + 64 entries (AddWithFree). (An
  // ordered set per class cost a tree rebalance per chunk filled or emptied:
  // 4% of a 1M-key RPC-MW point with two 256 B blocks a chunk.)
  std::vector<std::vector<uint64_t>> with_free_;
  SlabStats stats_;
};

}  // namespace dmb::apps::kv

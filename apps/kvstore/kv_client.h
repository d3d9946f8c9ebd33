// KvClient: one thread's handle on the disaggregated key-value store of the
// OneSidedMW paper (§5): a RACE-hashing index and KV blocks in MN memory,
// both obtained from any MemoryManager and reached with one-sided verbs.
//
// Partitioning (the paper: "with type-2 MWs, clients partition the key
// space"). A chunk is usable only through the access group that allocated it
// (kChunkQp isolation: the window is bound to that group's QPs), so index
// memory cannot be shared between threads, let alone CNs, on every approach.
// The store therefore has one partition per client thread: with C CNs of T
// client threads each, key k belongs to partition p = hash(k) % (C * T),
// which is client (cn = p / T, thread = p % T). A client serves only its own
// partition; any other key is refused with kInvalidArgument naming its owner.
// The same rule holds on approaches whose isolation would allow sharing, so
// every approach runs the same store. Each partition has exactly one writer;
// slots still change by CAS where the approach's chunks accept atomics (the
// store the paper measures), and by an 8-byte WRITE where they do not (see
// race_index.h; Open probes which, commit_mode() tells).
//
// Per operation (one-sided verbs only, no MN CPU unless the approach's
// allocation uses it):
//   Get:    READ both candidate buckets (one round trip), READ the KV block
//           of each fingerprint match, compare the key.
//   Put:    lookup as Get; allocate a block (a new chunk from the
//           MemoryManager when the class has no free block) and WRITE it;
//           commit the slot (insert 0 -> new, update old -> new); an update
//           frees the old block.
//   Delete: lookup; commit old -> 0; free the block (an empty chunk goes back
//           to the MN).
// KV block: u32 key length | u32 value length | key bytes | value bytes.
//
// Contract: Open first and Close last; one coroutine at a time per client.
// Setup errors (bad options, unsupported approach) come back as Status.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/kvstore/race_index.h"
#include "apps/kvstore/slab_alloc.h"
#include "systems/memory_manager.h"

namespace dmb::apps::kv {

enum class CommitPolicy : uint8_t {
  kAuto,   // CAS if the approach's chunks accept it, else WRITE
  kCas,    // CAS or Open fails with kUnsupported
  kWrite,  // always WRITE (single writer per partition)
};

struct KvOptions {
  uint32_t num_cns = 1;                   // CNs running clients (at most the testbed's)
  uint32_t threads_per_cn = 1;            // clients per CN
  uint64_t buckets_per_partition = 1024;  // 8 slots each; size for ~2x the keys
  std::vector<uint32_t> size_classes;     // empty: SlabAllocator::DefaultClasses
  CommitPolicy commit = CommitPolicy::kAuto;
};

struct KvStats {
  uint64_t inserts = 0;
  uint64_t updates = 0;
  uint64_t gets = 0;
  uint64_t get_hits = 0;
  uint64_t deletes = 0;           // keys actually removed
  uint64_t commit_retries = 0;    // a CAS found another slot value
  uint64_t fp_false_matches = 0;  // KV blocks read for another key
};

class KvClient {
 public:
  KvClient(systems::MemoryManager& mm, const KvOptions& opts, uint32_t cn, uint32_t thread);
  ~KvClient();
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  static uint32_t Partitions(const KvOptions& o) { return o.num_cns * o.threads_per_cn; }
  static uint32_t PartitionOf(std::string_view key, const KvOptions& o);
  uint32_t partition() const { return cn_ * opts_.threads_per_cn + thread_; }

  // Opens the access group, probes CAS, allocates and zeroes the index.
  // kUnsupported (naming the approach and why) where the store cannot run.
  Task<systems::Status> Open();
  // Insert or update.
  Task<systems::Status> Put(std::string_view key, std::string_view value);
  // ok() with a value, ok() with nullopt (not found), or the error.
  Task<systems::Result<std::optional<std::string>>> Get(std::string_view key);
  // ok() with true (removed) or false (was not there).
  Task<systems::Result<bool>> Delete(std::string_view key);
  // Returns every chunk (blocks and index) to the MN.
  Task<systems::Status> Close();

  const KvStats& stats() const { return stats_; }
  const SlabStats& alloc_stats() const;
  size_t index_chunks() const { return index_ ? index_->chunks() : 0; }
  CommitMode commit_mode() const { return mode_; }
  // Why the store commits with WRITE here (empty with CAS).
  const std::string& commit_note() const { return commit_note_; }

 private:
  struct Found {
    bool found = false;
    uint64_t bucket = 0;
    int slot = -1;
    uint64_t word = 0;
    int free_bucket = -1;  // 0 or 1: the less loaded candidate with an empty slot
    int free_slot = -1;
  };
  systems::Status CheckKey(const KeyHash& k) const;
  Task<systems::Status> ProbeCas();
  Task<systems::Status> Lookup(const KeyHash& k, std::string_view key, Found* f,
                               std::string* value);

  systems::MemoryManager& mm_;
  systems::CnSide& cnside_;
  KvOptions opts_;
  uint32_t cn_;
  uint32_t thread_;
  systems::AccessGroup* group_ = nullptr;
  std::unique_ptr<SlabAllocator> alloc_;
  std::unique_ptr<RaceIndex> index_;
  CommitMode mode_ = CommitMode::kCas;
  std::string commit_note_;
  KvStats stats_;
  uint64_t cas_addr_ = 0, buckets_addr_ = 0, read_addr_ = 0, stage_addr_ = 0;
};

}  // namespace dmb::apps::kv

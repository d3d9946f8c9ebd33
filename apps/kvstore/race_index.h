// RaceIndex: one partition of the KV store's RACE-hashing index, in MN
// memory obtained from the MemoryManager and reached only one-sidedly.
//
// Layout: `buckets` buckets of kSlotsPerBucket 8-byte slots (64 B) packed
// into chunks of the approach's granularity (a bucket never spans chunks).
// A key has two candidate buckets (two independent hashes); a lookup READs
// both in one round trip. A slot word is
//   fingerprint (8 bits) | length (8 bits, in 64 B units) | MN address (48 bits)
// of the key's KV block; 0 is an empty slot (the length field of a used slot
// is >= 1, so a used slot is never 0). A length of 255 means "the whole
// block" (blocks of 16 KB and more).
//
// Commits: a slot changes by CAS (insert 0 -> w, update w -> w', delete
// w -> 0), as in RACE. Some approaches bind their chunks' windows without
// remote-atomic access (the RNIC refuses the CAS); there a partition, which
// has exactly one writer (see kv_client.h), commits with an 8-byte WRITE.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "systems/memory_manager.h"

namespace dmb::apps::kv {

inline constexpr int kSlotsPerBucket = 8;
inline constexpr uint64_t kBucketBytes = kSlotsPerBucket * 8;
inline constexpr uint64_t kSlotLenUnit = 64;
inline constexpr uint64_t kAddrMask = (1ull << 48) - 1;

struct Slot {
  static uint64_t Pack(uint8_t fp, uint64_t used_bytes, uint64_t addr);
  static uint8_t Fp(uint64_t w) { return static_cast<uint8_t>(w >> 56); }
  static uint8_t LenUnits(uint64_t w) { return static_cast<uint8_t>(w >> 48); }
  static uint64_t Addr(uint64_t w) { return w & kAddrMask; }
  // Bytes to READ for the block of `w` whose class is `block_bytes`.
  static uint32_t ReadBytes(uint64_t w, uint32_t block_bytes);
};

// Everything the store derives from a key's bytes (deterministic hashes).
struct KeyHash {
  uint64_t h = 0;
  uint32_t partition = 0;  // h % partitions
  uint64_t bucket[2] = {0, 0};
  uint8_t fp = 0;
};
KeyHash HashKey(std::string_view key, uint32_t partitions, uint64_t buckets);
// KeyHash::h in two steps, for a caller that hashes bytes as it makes them:
// h = FinishKeyHash(Fnv1aStep(...Fnv1aStep(kFnv1aBasis, key[0])..., key[n-1])).
inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;
inline uint64_t Fnv1aStep(uint64_t h, unsigned char c) { return (h ^ c) * 0x100000001b3ull; }
// FNV-1a-64 of the bytes (before FinishKeyHash; also the key cache's body check).
uint64_t Fnv1a(std::string_view bytes);
uint64_t FinishKeyHash(uint64_t fnv1a);
// HashKey(key, partitions, *).partition alone (KeyGen computes the same from
// FinishKeyHash, for a batch of candidates at once).
uint32_t PartitionOfKey(std::string_view key, uint32_t partitions);

enum class CommitMode : uint8_t { kCas, kWrite };
std::string_view CommitModeName(CommitMode m);

class RaceIndex {
 public:
  RaceIndex(systems::CnSide& cn, systems::AccessGroup& group, uint64_t buckets, CommitMode mode);

  // Allocates the chunks and zeroes the buckets with WRITEs from the group
  // buffer [scratch, +scratch_bytes) (scratch_bytes a multiple of 64).
  Task<systems::Status> Create(uint64_t scratch, uint64_t scratch_bytes);
  // Returns every chunk to the MN.
  Task<systems::Status> Destroy();

  // Both candidate buckets of `k` into local [local, +2 * kBucketBytes).
  Task<systems::Status> ReadBuckets(systems::Lane& lane, const KeyHash& k, uint64_t local);
  // Moves slot (bucket, slot) from `expected` to `desired`. ok() and
  // value == expected: committed; ok() and another value: the slot held that
  // value, nothing changed (CAS only). `scratch` is 8 bytes of the buffer.
  Task<systems::Result<uint64_t>> Commit(systems::Lane& lane, uint64_t bucket, int slot,
                                         uint64_t expected, uint64_t desired, uint64_t scratch);

  uint64_t buckets() const { return buckets_; }
  size_t chunks() const { return chunks_.size(); }
  CommitMode mode() const { return mode_; }

 private:
  const systems::Chunk& ChunkOf(uint64_t bucket) const;
  uint64_t OffsetOf(uint64_t bucket) const;

  systems::CnSide& cn_;
  systems::AccessGroup& group_;
  uint64_t buckets_;
  uint64_t per_chunk_;
  CommitMode mode_;
  std::vector<systems::Chunk> chunks_;
};

}  // namespace dmb::apps::kv

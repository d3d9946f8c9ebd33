// KeyGen: a workload's new keys for one partition, never repeated, drawn
// from one Mt64 stream. A candidate is key_bytes characters of kKeyAlphabet
// (one stream word each, modulo its length); it is kept when it hashes into
// the partition (PartitionOfKey) and was not kept before. One candidate in
// `partitions` is kept (24 for figure 6's threads, 288 on six CNs x 48), so
// this loop is a run's largest CPU cost outside virtual time.
//
// Faster than the plain loop, same keys:
// - candidates are made kBatch at a time and their FNV-1a chains advanced
//   side by side (each byte's multiply waits on the one before; independent
//   chains keep the multiplier busy), then looked at in stream order; the
//   ones a call does not reach wait for the next call;
// - kept keys are remembered in an open-addressing table of their 64-bit
//   hashes (already computed) pointing into one arena of key bytes, not one
//   heap string per key; a hash match compares the bytes, so it is exact.
//
// Contract: Next() returns, key for key, what the plain loop returns (see
// key_gen_test). partition < partitions and key_bytes >= 1, or the
// constructor throws std::invalid_argument; at most 2^32 - 1 keys a
// generator (std::length_error).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "apps/kvstore/mt64.h"

namespace dmb::apps::kv {

inline constexpr std::string_view kKeyAlphabet =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

class KeyGen {
 public:
  KeyGen(uint32_t partitions, uint32_t partition, uint32_t key_bytes, Mt64 rng);
  std::string Next();

 private:
  static constexpr int kBatch = 4;
  void MakeBatch();
  // True when `key` (hash h) was not kept before; it is kept from now on.
  bool Keep(std::string_view key, uint64_t h);
  void Grow();

  uint32_t partitions_;
  uint32_t partition_;
  uint32_t key_bytes_;
  Mt64 rng_;
  std::string batch_;  // kBatch candidates, key_bytes_ each
  std::array<uint64_t, kBatch> hash_{};
  int next_ = kBatch;  // the next candidate of batch_ to look at
  // Kept keys: arena_ holds their bytes in order; table_ maps a hash's top
  // bits to (hash, 1 + index into the arena), 0 = empty; at most half full.
  std::string arena_;
  struct Slot {
    uint64_t h = 0;
    uint32_t key = 0;
  };
  std::vector<Slot> table_;
  uint32_t kept_ = 0;
  int shift_ = 0;  // 64 - log2(table_.size())
};

}  // namespace dmb::apps::kv

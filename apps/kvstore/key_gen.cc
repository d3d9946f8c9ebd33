#include "apps/kvstore/key_gen.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "apps/kvstore/race_index.h"

namespace dmb::apps::kv {

namespace {

uint32_t CheckedPartitions(uint32_t partitions, uint32_t partition, uint32_t key_bytes) {
  if (partitions == 0 || partition >= partitions || key_bytes == 0) {
    throw std::invalid_argument("KeyGen: partition " + std::to_string(partition) + " of " +
                                std::to_string(partitions) + ", " + std::to_string(key_bytes) +
                                "-byte keys: needs partition < partitions and a key of a byte "
                                "or more");
  }
  return partitions;
}

}  // namespace

KeyGen::KeyGen(uint32_t partitions, uint32_t partition, uint32_t key_bytes, Mt64 rng)
    : partitions_(CheckedPartitions(partitions, partition, key_bytes)),
      partition_(partition),
      key_bytes_(key_bytes),
      rng_(rng),
      batch_(static_cast<size_t>(kBatch) * key_bytes, '\0'),
      table_(64),
      shift_(64 - 6) {}

std::string KeyGen::Next() {
  for (;;) {
    if (next_ == kBatch) MakeBatch();
    const int i = next_++;
    if (hash_[i] % partitions_ != partition_) continue;
    const std::string_view key(batch_.data() + static_cast<size_t>(i) * key_bytes_, key_bytes_);
    if (Keep(key, hash_[i])) return std::string(key);
  }
}

void KeyGen::MakeBatch() {
  for (char& c : batch_) c = kKeyAlphabet[rng_() % kKeyAlphabet.size()];
  static_assert(kBatch == 4);  // four chains in four registers
  const auto* k0 = reinterpret_cast<const unsigned char*>(batch_.data());
  const auto *k1 = k0 + key_bytes_, *k2 = k1 + key_bytes_, *k3 = k2 + key_bytes_;
  uint64_t h[kBatch] = {kFnv1aBasis, kFnv1aBasis, kFnv1aBasis, kFnv1aBasis};
  for (uint32_t b = 0; b < key_bytes_; ++b) {
    h[0] = Fnv1aStep(h[0], k0[b]);
    h[1] = Fnv1aStep(h[1], k1[b]);
    h[2] = Fnv1aStep(h[2], k2[b]);
    h[3] = Fnv1aStep(h[3], k3[b]);
  }
  for (int i = 0; i < kBatch; ++i) hash_[i] = FinishKeyHash(h[i]);
  next_ = 0;
}

bool KeyGen::Keep(std::string_view key, uint64_t h) {
  // The top bits index the table: the low ones are alike in one partition.
  const size_t mask = table_.size() - 1;
  for (size_t s = h >> shift_;; s = (s + 1) & mask) {
    Slot& slot = table_[s];
    if (slot.key == 0) {
      if (kept_ == UINT32_MAX) throw std::length_error("KeyGen: 2^32 - 1 keys a partition");
      arena_.append(key);
      slot = {h, ++kept_};
      if (2ull * kept_ > table_.size()) Grow();
      return true;
    }
    if (slot.h == h && std::string_view(arena_).substr(
                           static_cast<size_t>(slot.key - 1) * key_bytes_, key_bytes_) == key) {
      return false;
    }
  }
}

void KeyGen::Grow() {
  std::vector<Slot> old(table_.size() * 2);
  old.swap(table_);
  --shift_;
  const size_t mask = table_.size() - 1;
  for (const Slot& e : old) {
    if (e.key == 0) continue;
    size_t s = e.h >> shift_;
    while (table_[s].key != 0) s = (s + 1) & mask;
    table_[s] = e;
  }
}

}  // namespace dmb::apps::kv

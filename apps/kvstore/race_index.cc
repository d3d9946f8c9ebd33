#include "apps/kvstore/race_index.h"

#include <algorithm>

#include "apps/kvstore/lane_ops.h"

namespace dmb::apps::kv {

using systems::Code;
using systems::Status;

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t Fnv1a(std::string_view bytes) {
  uint64_t h = kFnv1aBasis;
  for (unsigned char c : bytes) h = Fnv1aStep(h, c);
  return h;
}

uint64_t FinishKeyHash(uint64_t fnv1a) { return Mix(fnv1a); }

uint64_t Slot::Pack(uint8_t fp, uint64_t used_bytes, uint64_t addr) {
  const uint64_t units =
      std::clamp<uint64_t>((used_bytes + kSlotLenUnit - 1) / kSlotLenUnit, 1, 255);
  return static_cast<uint64_t>(fp) << 56 | units << 48 | (addr & kAddrMask);
}

uint32_t Slot::ReadBytes(uint64_t w, uint32_t block_bytes) {
  const uint64_t units = LenUnits(w);
  if (units == 255) return block_bytes;
  return static_cast<uint32_t>(std::min<uint64_t>(units * kSlotLenUnit, block_bytes));
}

uint32_t PartitionOfKey(std::string_view key, uint32_t partitions) {
  return static_cast<uint32_t>(Mix(Fnv1a(key)) % partitions);
}

KeyHash HashKey(std::string_view key, uint32_t partitions, uint64_t buckets) {
  KeyHash k;
  k.h = Mix(Fnv1a(key));
  k.partition = static_cast<uint32_t>(k.h % partitions);
  k.bucket[0] = Mix(k.h ^ 0x5bd1e9955bd1e995ull) % buckets;
  k.bucket[1] = Mix(k.h ^ 0x27d4eb2f165667c5ull) % buckets;
  if (buckets > 1 && k.bucket[1] == k.bucket[0]) k.bucket[1] = (k.bucket[0] + 1) % buckets;
  k.fp = static_cast<uint8_t>(Mix(k.h ^ 0x9e3779b97f4a7c15ull) >> 56);
  return k;
}

std::string_view CommitModeName(CommitMode m) { return m == CommitMode::kCas ? "cas" : "write"; }

RaceIndex::RaceIndex(systems::CnSide& cn, systems::AccessGroup& group, uint64_t buckets,
                     CommitMode mode)
    : cn_(cn),
      group_(group),
      buckets_(buckets),
      per_chunk_(cn.caps().granularity_bytes / kBucketBytes),
      mode_(mode) {}

const systems::Chunk& RaceIndex::ChunkOf(uint64_t bucket) const {
  return chunks_[bucket / per_chunk_];
}
uint64_t RaceIndex::OffsetOf(uint64_t bucket) const { return (bucket % per_chunk_) * kBucketBytes; }

Task<Status> RaceIndex::Create(uint64_t scratch, uint64_t scratch_bytes) {
  if (per_chunk_ == 0) {
    co_return Status(Code::kUnsupported, "chunks of " +
                                             std::to_string(cn_.caps().granularity_bytes) +
                                             " B cannot hold one 64 B index bucket");
  }
  cn_.node()->memory().Fill(scratch, 0, scratch_bytes);
  const uint64_t n = (buckets_ + per_chunk_ - 1) / per_chunk_;
  for (uint64_t i = 0; i < n; ++i) {
    auto r = co_await cn_.Alloc(group_);
    if (!r.ok()) co_return r.status;
    chunks_.push_back(r.value);
    const uint64_t used = std::min(buckets_ - i * per_chunk_, per_chunk_) * kBucketBytes;
    for (uint64_t off = 0; off < used; off += scratch_bytes) {
      const uint32_t len = static_cast<uint32_t>(std::min(scratch_bytes, used - off));
      Status st = co_await cn_.Write(group_.lane(0), r.value, off, len, scratch);
      if (!st.ok()) co_return st;
    }
  }
  co_return Status::Ok();
}

Task<Status> RaceIndex::Destroy() {
  Status first;
  for (const systems::Chunk& c : chunks_) {
    Status st = co_await cn_.Free(group_, c);
    if (!st.ok() && first.ok()) first = st;
  }
  chunks_.clear();
  co_return first;
}

Task<Status> RaceIndex::ReadBuckets(systems::Lane& lane, const KeyHash& k, uint64_t local) {
  std::vector<ReadOp> ops;
  for (int i = 0; i < 2; ++i) {
    ops.push_back({&ChunkOf(k.bucket[i]), OffsetOf(k.bucket[i]),
                   static_cast<uint32_t>(kBucketBytes), local + i * kBucketBytes});
  }
  co_return co_await ReadMany(lane, ops);
}

Task<systems::Result<uint64_t>> RaceIndex::Commit(systems::Lane& lane, uint64_t bucket, int slot,
                                                  uint64_t expected, uint64_t desired,
                                                  uint64_t scratch) {
  const systems::Chunk& c = ChunkOf(bucket);
  const uint64_t off = OffsetOf(bucket) + 8 * static_cast<uint64_t>(slot);
  if (mode_ == CommitMode::kCas) {
    co_return co_await CompareAndSwap(lane, c, off, expected, desired, scratch,
                                      cn_.node()->memory());
  }
  systems::Result<uint64_t> out;
  cn_.node()->memory().StoreU64(scratch, desired);
  out.status = co_await cn_.Write(lane, c, off, 8, scratch);
  out.value = expected;
  co_return out;
}

}  // namespace dmb::apps::kv

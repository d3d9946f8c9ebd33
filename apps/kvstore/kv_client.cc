#include "apps/kvstore/kv_client.h"

#include <cstring>

#include "apps/kvstore/lane_ops.h"
#include "systems/knobs.h"

namespace dmb::apps::kv {

using systems::Code;
using systems::Result;
using systems::Status;

namespace {

constexpr uint64_t kHeaderBytes = 8;  // u32 key length, u32 value length
constexpr int kMaxCommitAttempts = 16;

Status NotOpen() { return Status(Code::kInvalidArgument, "the KV client is not open"); }

}  // namespace

KvClient::KvClient(systems::MemoryManager& mm, const KvOptions& opts, uint32_t cn, uint32_t thread)
    : mm_(mm), cnside_(mm.cn(cn)), opts_(opts), cn_(cn), thread_(thread) {}

KvClient::~KvClient() = default;

const SlabStats& KvClient::alloc_stats() const {
  static const SlabStats kNone;
  return alloc_ ? alloc_->stats() : kNone;
}

uint32_t KvClient::PartitionOf(std::string_view key, const KvOptions& o) {
  return PartitionOfKey(key, Partitions(o));
}

Status KvClient::CheckKey(const KeyHash& k) const {
  if (!index_) return NotOpen();
  if (k.partition == partition()) return Status::Ok();
  const uint32_t t = opts_.threads_per_cn;
  return Status(Code::kInvalidArgument,
                "key belongs to CN " + std::to_string(k.partition / t) + " thread " +
                    std::to_string(k.partition % t) + " (partition " + std::to_string(k.partition) +
                    "); this client serves partition " + std::to_string(partition()) + " (CN " +
                    std::to_string(cn_) + " thread " + std::to_string(thread_) + ")");
}

Task<Status> KvClient::Open() {
  const systems::Capabilities& caps = cnside_.caps();
  if (caps.fixed_io_bytes != 0) {
    co_return Status(Code::kUnsupported, mm_.system() + ": fixed " +
                                             systems::FormatSize(caps.fixed_io_bytes) +
                                             " I/O; the KV store needs variable-size I/O and CAS");
  }
  if (caps.isolation == systems::Isolation::kTranslated) {
    co_return Status(Code::kUnsupported,
                     mm_.system() +
                         ": no rkeys (pages named through a translation table); the "
                         "KV store needs one-sided READ, WRITE and CAS on chunks");
  }
  if (opts_.num_cns == 0 || opts_.threads_per_cn == 0 || opts_.num_cns > mm_.num_cns() ||
      cn_ >= opts_.num_cns || thread_ >= opts_.threads_per_cn) {
    co_return Status(Code::kInvalidArgument,
                     "client (CN " + std::to_string(cn_) + ", thread " + std::to_string(thread_) +
                         ") is outside " + std::to_string(opts_.num_cns) + " CNs x " +
                         std::to_string(opts_.threads_per_cn) + " threads (the testbed has " +
                         std::to_string(mm_.num_cns()) + " CNs)");
  }
  if (opts_.buckets_per_partition == 0) {
    co_return Status(Code::kInvalidArgument, "buckets_per_partition must be at least 1");
  }
  std::vector<uint32_t> classes = opts_.size_classes.empty()
                                      ? SlabAllocator::DefaultClasses(caps.granularity_bytes)
                                      : opts_.size_classes;
  if (classes.empty()) {
    co_return Status(Code::kUnsupported, mm_.system() + ": chunks of " +
                                             std::to_string(caps.granularity_bytes) +
                                             " B are smaller than the smallest size class (64 B)");
  }
  Status st = SlabAllocator::CheckClasses(classes, caps.granularity_bytes);
  if (!st.ok()) co_return Status(st.code(), mm_.system() + ": " + st.message());
  const uint64_t max_block = classes.back();
  group_ = co_await cnside_.OpenGroup(1, 256 + 2 * max_block);
  cas_addr_ = group_->buffer_addr();
  buckets_addr_ = cas_addr_ + 64;
  read_addr_ = cas_addr_ + 256;
  stage_addr_ = read_addr_ + max_block;

  st = co_await ProbeCas();
  if (!st.ok()) co_return st;
  alloc_ = std::make_unique<SlabAllocator>(cnside_, *group_, std::move(classes));
  auto index = std::make_unique<RaceIndex>(cnside_, *group_, opts_.buckets_per_partition, mode_);
  const uint64_t scratch = std::max<uint64_t>(64, max_block / 64 * 64);
  st = co_await index->Create(stage_addr_, scratch);
  index_ = std::move(index);  // even on failure: Close returns what it got
  co_return st;
}

// CAS on the first word of a fresh chunk (0 -> 0 changes nothing). A refusal
// breaks the lane: it is recovered before the store holds any other chunk,
// so no window bound to the old QP is lost.
Task<Status> KvClient::ProbeCas() {
  if (opts_.commit == CommitPolicy::kWrite) {
    mode_ = CommitMode::kWrite;
    commit_note_ = "commits by WRITE (asked for)";
    co_return Status::Ok();
  }
  auto probe = co_await cnside_.Alloc(*group_);
  if (!probe.ok()) co_return probe.status;
  systems::Lane& lane = group_->lane(0);
  auto cas =
      co_await CompareAndSwap(lane, probe.value, 0, 0, 0, cas_addr_, cnside_.node()->memory());
  Status refused;
  if (cas.ok()) {
    mode_ = CommitMode::kCas;
  } else if (cas.status.code() == Code::kAccessDenied) {
    refused = cas.status;
    Status rec = co_await cnside_.RecoverLane(lane);
    if (!rec.ok()) co_return rec;
    mode_ = CommitMode::kWrite;
    commit_note_ = mm_.system() + ": chunks refuse remote atomics (" + refused.message() +
                   "); one writer per partition commits slots by WRITE";
  } else {
    co_return cas.status;
  }
  Status fr = co_await cnside_.Free(*group_, probe.value);
  if (!fr.ok()) co_return fr;
  if (mode_ == CommitMode::kWrite && opts_.commit == CommitPolicy::kCas) {
    co_return Status(Code::kUnsupported, commit_note_);
  }
  co_return Status::Ok();
}

Task<Status> KvClient::Lookup(const KeyHash& k, std::string_view key, Found* f,
                              std::string* value) {
  systems::Lane& lane = group_->lane(0);
  Status st = co_await index_->ReadBuckets(lane, k, buckets_addr_);
  if (!st.ok()) co_return st;
  auto& mem = cnside_.node()->memory();
  uint64_t words[2][kSlotsPerBucket];
  mem.Read(buckets_addr_, words, sizeof(words));
  int used[2] = {0, 0};
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < kSlotsPerBucket; ++s) {
      const uint64_t w = words[b][s];
      if (w == 0) continue;
      ++used[b];
      if (f->found || Slot::Fp(w) != k.fp) continue;
      const Slab* slab = alloc_->Find(Slot::Addr(w));
      if (!slab) {
        co_return Status(Code::kInvalidArgument, "index slot " + std::to_string(s) + " of bucket " +
                                                     std::to_string(k.bucket[b]) +
                                                     " points at no block of this client");
      }
      const uint64_t off = Slot::Addr(w) - slab->chunk.addr;
      const uint32_t len = Slot::ReadBytes(w, slab->block_bytes);
      st = co_await cnside_.Read(lane, slab->chunk, off, len, read_addr_);
      if (!st.ok()) co_return st;
      uint32_t hdr[2];
      mem.Read(read_addr_, hdr, sizeof(hdr));
      if (kHeaderBytes + hdr[0] + hdr[1] > len) {
        co_return Status(Code::kInvalidArgument, "KV block at MN address " +
                                                     std::to_string(Slot::Addr(w)) +
                                                     " has a header larger than the block");
      }
      std::string stored(hdr[0], '\0');
      mem.Read(read_addr_ + kHeaderBytes, stored.data(), hdr[0]);
      if (stored != key) {
        ++stats_.fp_false_matches;
        continue;
      }
      f->found = true;
      f->bucket = k.bucket[b];
      f->slot = s;
      f->word = w;
      if (value) {
        value->resize(hdr[1]);
        mem.Read(read_addr_ + kHeaderBytes + hdr[0], value->data(), hdr[1]);
      }
    }
  }
  // Insert into the less loaded candidate (RACE), the first bucket on a tie.
  const int order[2] = {used[1] < used[0] ? 1 : 0, used[1] < used[0] ? 0 : 1};
  for (int b : order) {
    for (int s = 0; s < kSlotsPerBucket && f->free_slot < 0; ++s) {
      if (words[b][s] == 0) {
        f->free_bucket = b;
        f->free_slot = s;
      }
    }
  }
  co_return Status::Ok();
}

Task<Status> KvClient::Put(std::string_view key, std::string_view value) {
  const KeyHash k = HashKey(key, Partitions(opts_), opts_.buckets_per_partition);
  Status st = CheckKey(k);
  if (!st.ok()) co_return st;
  const uint64_t used = kHeaderBytes + key.size() + value.size();
  if (alloc_->ClassFor(used) < 0) {
    co_return Status(
        Code::kUnsupported,
        "key (" + std::to_string(key.size()) + " B) and value (" + std::to_string(value.size()) +
            " B) need a " + std::to_string(used) + " B block; the largest size class is " +
            systems::FormatSize(alloc_->max_block_bytes()) + " (" + mm_.system() + " chunks of " +
            systems::FormatSize(cnside_.caps().granularity_bytes) + ")");
  }
  auto& mem = cnside_.node()->memory();
  systems::Lane& lane = group_->lane(0);
  for (int attempt = 0; attempt < kMaxCommitAttempts; ++attempt) {
    Found f;
    st = co_await Lookup(k, key, &f, nullptr);
    if (!st.ok()) co_return st;
    if (!f.found && f.free_slot < 0) {
      co_return Status(Code::kOutOfMemory,
                       "index partition " + std::to_string(partition()) +
                           " is full for this key (buckets " + std::to_string(k.bucket[0]) +
                           " and " + std::to_string(k.bucket[1]) + " hold 8 keys each); raise " +
                           "buckets_per_partition (now " +
                           std::to_string(opts_.buckets_per_partition) + ")");
    }
    auto block = co_await alloc_->Alloc(used);
    if (!block.ok()) co_return block.status;
    const uint32_t hdr[2] = {static_cast<uint32_t>(key.size()),
                             static_cast<uint32_t>(value.size())};
    mem.Write(stage_addr_, hdr, sizeof(hdr));
    mem.Write(stage_addr_ + kHeaderBytes, key.data(), key.size());
    mem.Write(stage_addr_ + kHeaderBytes + key.size(), value.data(), value.size());
    const uint64_t addr = block.value.addr();
    st = co_await cnside_.Write(lane, block.value.slab->chunk, block.value.offset,
                                static_cast<uint32_t>(used), stage_addr_);
    if (!st.ok()) {
      (void)co_await alloc_->Free(addr);
      co_return st;
    }
    const uint64_t desired = Slot::Pack(k.fp, used, addr);
    const uint64_t expected = f.found ? f.word : 0;
    const uint64_t bucket = f.found ? f.bucket : k.bucket[f.free_bucket];
    const int slot = f.found ? f.slot : f.free_slot;
    auto c = co_await index_->Commit(lane, bucket, slot, expected, desired, cas_addr_);
    if (!c.ok() || c.value != expected) {
      (void)co_await alloc_->Free(addr);
      if (!c.ok()) co_return c.status;
      ++stats_.commit_retries;
      continue;
    }
    if (f.found) {
      ++stats_.updates;
      co_return co_await alloc_->Free(Slot::Addr(expected));
    }
    ++stats_.inserts;
    co_return Status::Ok();
  }
  co_return Status(Code::kInvalidArgument, "the key's slot changed under " +
                                               std::to_string(kMaxCommitAttempts) +
                                               " commits in a row; another writer on partition " +
                                               std::to_string(partition()) + "?");
}

Task<Result<std::optional<std::string>>> KvClient::Get(std::string_view key) {
  Result<std::optional<std::string>> out;
  const KeyHash k = HashKey(key, Partitions(opts_), opts_.buckets_per_partition);
  out.status = CheckKey(k);
  if (!out.ok()) co_return out;
  ++stats_.gets;
  Found f;
  std::string value;
  out.status = co_await Lookup(k, key, &f, &value);
  if (out.ok() && f.found) {
    ++stats_.get_hits;
    out.value = std::move(value);
  }
  co_return out;
}

Task<Result<bool>> KvClient::Delete(std::string_view key) {
  Result<bool> out;
  const KeyHash k = HashKey(key, Partitions(opts_), opts_.buckets_per_partition);
  out.status = CheckKey(k);
  if (!out.ok()) co_return out;
  for (int attempt = 0; attempt < kMaxCommitAttempts; ++attempt) {
    Found f;
    out.status = co_await Lookup(k, key, &f, nullptr);
    if (!out.ok() || !f.found) co_return out;
    auto c = co_await index_->Commit(group_->lane(0), f.bucket, f.slot, f.word, 0, cas_addr_);
    if (!c.ok()) {
      out.status = c.status;
      co_return out;
    }
    if (c.value != f.word) {
      ++stats_.commit_retries;
      continue;
    }
    ++stats_.deletes;
    out.value = true;
    out.status = co_await alloc_->Free(Slot::Addr(f.word));
    co_return out;
  }
  out.status =
      Status(Code::kInvalidArgument, "the key's slot changed under " +
                                         std::to_string(kMaxCommitAttempts) + " commits in a row");
  co_return out;
}

Task<Status> KvClient::Close() {
  Status first;
  if (alloc_) first = co_await alloc_->ReleaseAll();
  if (index_) {
    Status st = co_await index_->Destroy();
    if (first.ok()) first = st;
    index_.reset();
  }
  co_return first;
}

}  // namespace dmb::apps::kv

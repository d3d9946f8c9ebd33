#include "apps/kvstore/slab_alloc.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>

#include "systems/knobs.h"

namespace dmb::apps::kv {

using systems::Code;
using systems::Status;

std::vector<uint32_t> SlabAllocator::DefaultClasses(uint64_t granularity) {
  std::vector<uint32_t> out;
  for (uint64_t c = 64; c <= std::min<uint64_t>(32768, granularity); c *= 2) {
    out.push_back(static_cast<uint32_t>(c));
  }
  return out;
}

Status SlabAllocator::CheckClasses(const std::vector<uint32_t>& classes, uint64_t granularity) {
  if (classes.empty()) return Status(Code::kInvalidArgument, "no size classes");
  for (size_t i = 0; i < classes.size(); ++i) {
    if (classes[i] < 8 || (i > 0 && classes[i] <= classes[i - 1])) {
      return Status(Code::kInvalidArgument,
                    "size classes must be ascending and at least 8 B; class " + std::to_string(i) +
                        " is " + std::to_string(classes[i]) + " B");
    }
    if (classes[i] > granularity) {
      return Status(Code::kUnsupported, "size class " + systems::FormatSize(classes[i]) +
                                            " is larger than the approach's chunk (" +
                                            systems::FormatSize(granularity) +
                                            "): a block cannot span chunks");
    }
  }
  return Status::Ok();
}

SlabAllocator::SlabAllocator(systems::CnSide& cn, systems::AccessGroup& group,
                             std::vector<uint32_t> classes)
    : cn_(cn), group_(group), classes_(std::move(classes)), with_free_(classes_.size()) {
  stats_.granularity_bytes = cn.caps().granularity_bytes;
  irregular_ = stats_.granularity_bytes == 0;
}

int SlabAllocator::ClassFor(uint64_t bytes) const {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (bytes <= classes_[i]) return static_cast<int>(i);
  }
  return -1;
}

Task<systems::Result<Block>> SlabAllocator::Alloc(uint64_t bytes) {
  systems::Result<Block> out;
  const int cls = ClassFor(bytes);
  if (cls < 0) {
    out.status =
        Status(Code::kUnsupported, "a KV block of " + std::to_string(bytes) +
                                       " B exceeds the largest size class (" +
                                       systems::FormatSize(classes_.back()) + ", chunk " +
                                       systems::FormatSize(stats_.granularity_bytes) + ")");
    co_return out;
  }
  Slab* s = FirstWithFree(static_cast<uint32_t>(cls));
  if (!s) {
    auto r = co_await cn_.Alloc(group_);
    if (!r.ok()) {
      out.status = r.status;
      co_return out;
    }
    if (r.value.bytes < classes_[cls]) {  // not a block of the class: keep nothing
      out.status = Status(Code::kUnsupported,
                          "the MN gave a chunk of " + systems::FormatSize(r.value.bytes) +
                              ", smaller than the " + systems::FormatSize(classes_[cls]) +
                              " size class it was taken for");
      (void)co_await cn_.Free(group_, r.value);
      co_return out;
    }
    s = MakeSlab(r.value, static_cast<uint32_t>(cls));
    AddWithFree(*s);
    ++stats_.chunks_allocated;
    ++stats_.chunks_held;
    stats_.peak_chunks_held = std::max(stats_.peak_chunks_held, stats_.chunks_held);
    // A block freed meanwhile (by another coroutine of this thread) in a
    // lower chunk goes first, as it would have without the wait.
    s = FirstWithFree(static_cast<uint32_t>(cls));
  }
  const uint32_t b = s->free_list.back();
  s->free_list.pop_back();
  s->in_use[b] = true;
  ++stats_.blocks_in_use;
  out.value.slab = s;
  out.value.offset = static_cast<uint64_t>(b) * s->block_bytes;
  co_return out;
}

Slab* SlabAllocator::MakeSlab(const systems::Chunk& chunk, uint32_t cls) {
  Slab* s;
  if (spare_.empty()) {
    s = &store_.emplace_back();
  } else {
    s = spare_.back();
    spare_.pop_back();
  }
  s->chunk = chunk;
  s->size_class = cls;
  s->block_bytes = classes_[cls];
  s->blocks = static_cast<uint32_t>(chunk.bytes / s->block_bytes);
  s->in_use.assign(s->blocks, false);
  s->free_list.clear();
  for (uint32_t b = s->blocks; b-- > 0;) s->free_list.push_back(b);
  if (!irregular_ && chunk.bytes != stats_.granularity_bytes) {
    irregular_ = true;
    IndexByAddress();
  }
  if (irregular_) {
    by_addr_[chunk.addr] = s;
  } else {
    by_quotient_.Put(chunk.addr / stats_.granularity_bytes, s);
  }
  return s;
}

void SlabAllocator::IndexByAddress() {
  by_quotient_.ForEach([&](uint64_t, Slab* held) { by_addr_[held->chunk.addr] = held; });
  by_quotient_.Clear();
}

Slab* SlabAllocator::SlabAt(uint64_t chunk_addr) const {
  Slab* s = nullptr;
  if (irregular_) {
    auto it = by_addr_.find(chunk_addr);
    if (it != by_addr_.end()) s = it->second;
  } else {
    s = by_quotient_.Find(chunk_addr / stats_.granularity_bytes);
  }
  return s && s->chunk.addr == chunk_addr ? s : nullptr;
}

void SlabAllocator::Forget(Slab& s) {
  if (irregular_) {
    by_addr_.erase(s.chunk.addr);
  } else {
    by_quotient_.Erase(s.chunk.addr / stats_.granularity_bytes);
  }
  spare_.push_back(&s);
}

Slab* SlabAllocator::WithFreeAt(uint64_t chunk_addr, uint32_t cls) const {
  Slab* s = SlabAt(chunk_addr);
  return s && s->size_class == cls && !s->free_list.empty() ? s : nullptr;
}

Slab* SlabAllocator::FirstWithFree(uint32_t cls) {
  std::vector<uint64_t>& heap = with_free_[cls];
  while (!heap.empty()) {
    if (Slab* s = WithFreeAt(heap.front(), cls)) return s;
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.pop_back();
  }
  return nullptr;
}

void SlabAllocator::AddWithFree(const Slab& s) {
  std::vector<uint64_t>& heap = with_free_[s.size_class];
  if (heap.size() >= 2 * stats_.chunks_held + 64) {  // mostly stale: keep the live, once each
    std::vector<uint64_t> live;
    for (uint64_t a : heap) {
      if (WithFreeAt(a, s.size_class)) live.push_back(a);
    }
    std::sort(live.begin(), live.end());
    live.erase(std::unique(live.begin(), live.end()), live.end());
    heap = std::move(live);  // ascending: already a min-heap
  }
  heap.push_back(s.chunk.addr);
  std::push_heap(heap.begin(), heap.end(), std::greater<>());
}

Slab* SlabAllocator::SlabOf(uint64_t addr) const {
  Slab* s = nullptr;
  if (irregular_) {
    auto it = by_addr_.upper_bound(addr);
    if (it == by_addr_.begin()) return nullptr;
    s = std::prev(it)->second;
  } else {
    const uint64_t q = addr / stats_.granularity_bytes;
    s = by_quotient_.Find(q);
    if (!s || s->chunk.addr > addr) {
      if (q == 0) return nullptr;
      s = by_quotient_.Find(q - 1);
      if (!s) return nullptr;
    }
  }
  if (addr < s->chunk.addr) return nullptr;
  if (addr - s->chunk.addr >= static_cast<uint64_t>(s->blocks) * s->block_bytes) return nullptr;
  if ((addr - s->chunk.addr) % s->block_bytes != 0) return nullptr;
  return s;
}

const Slab* SlabAllocator::Find(uint64_t addr) const {
  const Slab* s = SlabOf(addr);
  if (!s || !s->in_use[(addr - s->chunk.addr) / s->block_bytes]) return nullptr;
  return s;
}

Task<Status> SlabAllocator::Free(uint64_t addr) {
  Slab* s = SlabOf(addr);
  const uint32_t b = s ? static_cast<uint32_t>((addr - s->chunk.addr) / s->block_bytes) : 0;
  if (!s || !s->in_use[b]) {
    co_return Status(Code::kInvalidArgument,
                     "MN address " + std::to_string(addr) + " is not a block in use here");
  }
  s->in_use[b] = false;
  s->free_list.push_back(b);
  --stats_.blocks_in_use;
  if (s->free_list.size() == 1) AddWithFree(*s);
  if (s->free_list.size() < s->blocks) co_return Status::Ok();
  Status st = co_await cn_.Free(group_, s->chunk);
  if (!st.ok()) co_return st;
  Forget(*s);
  ++stats_.chunks_returned;
  --stats_.chunks_held;
  co_return Status::Ok();
}

Task<Status> SlabAllocator::ReleaseAll() {
  IndexByAddress();  // chunks go back in address order
  Status first;
  while (!by_addr_.empty()) {
    auto it = by_addr_.begin();
    Status st = co_await cn_.Free(group_, it->second->chunk);
    if (!st.ok() && first.ok()) first = st;
    if (st.ok()) {
      ++stats_.chunks_returned;
      --stats_.chunks_held;
    }
    spare_.push_back(it->second);
    by_addr_.erase(it);
  }
  for (auto& h : with_free_) h.clear();
  stats_.blocks_in_use = 0;
  co_return first;
}

}  // namespace dmb::apps::kv

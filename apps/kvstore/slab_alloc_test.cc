// SlabAllocator's address lookups (Find, Free) on chunks that are not aligned
// to their size, and on chunks of another size than the approach's granularity
// (the ordered-map fallback): both must find exactly the blocks in use; and
// the change from one index to the other, and slabs reused for new chunks.
#include "apps/kvstore/slab_alloc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "fabric/sim/simulator.h"

namespace dmb::apps::kv {
namespace {

using systems::Chunk;
using systems::Code;
using systems::Result;
using systems::Status;

// Hands out chunks of `chunk_bytes` at base + i * stride; records frees.
class FakeCn : public systems::CnSide {
 public:
  FakeCn(uint64_t granularity, uint64_t chunk_bytes, uint64_t base, uint64_t stride)
      : chunk_bytes_(chunk_bytes), base_(base), stride_(stride) {
    caps_.granularity_bytes = granularity;
  }
  const systems::Capabilities& caps() const override { return caps_; }
  uint32_t cn_index() const override { return 0; }
  fabric::Node* node() const override { return nullptr; }
  Task<systems::AccessGroup*> OpenGroup(int, uint64_t) override { co_return nullptr; }
  Task<Result<Chunk>> Alloc(systems::AccessGroup&) override {
    Result<Chunk> r;
    r.value.addr = base_ + next_++ * stride_;
    r.value.bytes = chunk_bytes_;
    co_return r;
  }
  Task<Status> Free(systems::AccessGroup&, const Chunk& c) override {
    freed.push_back(c.addr);
    co_return Status::Ok();
  }
  Task<Status> Read(systems::Lane&, const Chunk&, uint64_t, uint32_t, uint64_t) override {
    co_return Status::Ok();
  }
  Task<Status> Write(systems::Lane&, const Chunk&, uint64_t, uint32_t, uint64_t) override {
    co_return Status::Ok();
  }
  Task<Status> Extend(systems::Lane&, Chunk&) override { co_return Status::Ok(); }
  Task<Status> RecoverLane(systems::Lane&) override { co_return Status::Ok(); }
  std::vector<uint64_t> freed;
  uint64_t chunk_bytes_;  // of the next chunk handed out

 private:
  systems::Capabilities caps_;
  uint64_t base_, stride_;
  uint64_t next_ = 0;
};

template <typename T>
T Await(Task<T> t) {
  sim::Simulator s(1);
  T out{};
  s.Spawn([](Task<T> t, T* o) -> Task<void> { *o = co_await std::move(t); }(std::move(t), &out));
  s.Run();
  return out;
}

struct Layout {
  const char* name;
  uint64_t granularity, chunk_bytes, base, stride;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

class SlabLookup : public ::testing::TestWithParam<Layout> {};

// 4 chunks of 1 KB blocks; every address around them is probed.
TEST_P(SlabLookup, FindsExactlyTheBlocksInUseAndReturnsEmptyChunks) {
  const Layout l = GetParam();
  FakeCn cn(l.granularity, l.chunk_bytes, l.base, l.stride);
  systems::AccessGroup group(0, nullptr, 0, 0);
  SlabAllocator a(cn, group, {1024});
  const uint64_t per_chunk = l.chunk_bytes / 1024;
  std::vector<uint64_t> blocks;
  for (uint64_t i = 0; i < 4 * per_chunk; ++i) {
    Result<Block> r = Await(a.Alloc(1000));
    ASSERT_TRUE(r.ok()) << r.status.message();
    blocks.push_back(r.value.addr());
  }
  for (uint64_t c = 0; c < 4; ++c) {
    const uint64_t chunk = l.base + c * l.stride;
    for (uint64_t off = 0; off < l.stride; off += 512) {
      const Slab* s = a.Find(chunk + off);
      const bool block = off < l.chunk_bytes && off % 1024 == 0;
      EXPECT_EQ(s != nullptr, block) << "chunk " << c << " offset " << off;
      if (s) {
        EXPECT_EQ(s->chunk.addr, chunk);
      }
    }
  }
  EXPECT_EQ(a.Find(l.base - 1024), nullptr);
  EXPECT_EQ(Await(a.Free(l.base + 512)).code(), Code::kInvalidArgument);
  // Free every block of chunk 2 (one twice): the chunk goes back, once.
  for (uint64_t i = 2 * per_chunk; i < 3 * per_chunk; ++i)
    EXPECT_TRUE(Await(a.Free(blocks[i])).ok());
  EXPECT_EQ(Await(a.Free(blocks[2 * per_chunk])).code(), Code::kInvalidArgument);
  EXPECT_EQ(cn.freed, std::vector<uint64_t>{l.base + 2 * l.stride});
  EXPECT_EQ(a.Find(blocks[2 * per_chunk]), nullptr);
  // A freed block of chunk 1 is handed out again before a new chunk is taken.
  EXPECT_TRUE(Await(a.Free(blocks[per_chunk + 1])).ok());
  Result<Block> again = Await(a.Alloc(1000));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value.addr(), blocks[per_chunk + 1]);
  EXPECT_EQ(a.stats().chunks_allocated, 4u);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SlabLookup,
                         ::testing::Values(Layout{"aligned", 4096, 4096, 1 << 20, 4096},
                                           Layout{"unaligned", 4096, 4096, (1 << 20) + 1536, 4096},
                                           Layout{"unaligned_gaps", 4096, 4096, (1 << 20) + 3072,
                                                  3 * 4096},
                                           Layout{"chunks_larger_than_granularity", 2048, 8192,
                                                  (1 << 20) + 512, 3 * 8192}),
                         [](const auto& info) { return std::string(info.param.name); });

// Chunks of the granularity's size first, then one larger: the blocks of the
// earlier chunks are still found and freed once the index changes to the
// ordered map, and a chunk that went back is not found again.
TEST(SlabAllocator, KeepsEarlierChunksWhenALargerChunkArrives) {
  FakeCn cn(4096, 4096, 1 << 20, 16384);
  systems::AccessGroup group(0, nullptr, 0, 0);
  SlabAllocator a(cn, group, {1024, 4096});
  std::vector<uint64_t> small;
  for (int i = 0; i < 8; ++i) small.push_back(Await(a.Alloc(1000)).value.addr());  // chunks 0, 1
  cn.chunk_bytes_ = 8192;
  Result<Block> big = Await(a.Alloc(4096));  // chunk 2: the allocator becomes irregular
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big.value.addr(), (1u << 20) + 2 * 16384);
  for (uint64_t addr : small) EXPECT_NE(a.Find(addr), nullptr) << addr;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Await(a.Free(small[i])).ok());
  EXPECT_EQ(cn.freed, std::vector<uint64_t>{1u << 20});
  EXPECT_EQ(a.Find(small[0]), nullptr);
  EXPECT_NE(a.Find(small[4]), nullptr);
  EXPECT_NE(a.Find(big.value.addr()), nullptr);
}

// A slab whose chunk went back is reused for the next chunk, of another
// class: it must carry that class's block size and count, every block free.
TEST(SlabAllocator, ReusedSlabTakesTheNewChunksClass) {
  FakeCn cn(4096, 4096, 1 << 20, 4096);
  systems::AccessGroup group(0, nullptr, 0, 0);
  SlabAllocator a(cn, group, {1024, 2048});
  std::vector<uint64_t> first;
  for (int i = 0; i < 4; ++i) first.push_back(Await(a.Alloc(1000)).value.addr());
  for (uint64_t addr : first) ASSERT_TRUE(Await(a.Free(addr)).ok());
  ASSERT_EQ(cn.freed.size(), 1u);
  Result<Block> x = Await(a.Alloc(2000));
  Result<Block> y = Await(a.Alloc(2000));
  Result<Block> z = Await(a.Alloc(2000));
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(x.value.slab->block_bytes, 2048u);
  EXPECT_EQ(x.value.slab->blocks, 2u);
  EXPECT_EQ(x.value.slab, y.value.slab);
  EXPECT_NE(z.value.slab, x.value.slab);  // the chunk held two blocks only
  EXPECT_EQ(y.value.addr(), x.value.addr() + 2048);
  EXPECT_EQ(a.Find(x.value.addr() + 1024), nullptr);  // not a 2 KB block's start
  EXPECT_EQ(a.stats().chunks_allocated, 3u);
}

// Rounds of random frees and allocations over 60 chunks of four blocks: every
// block handed out comes from the lowest-addressed chunk that has a free one
// (its chunks' free-block heap drops stale entries lazily and is rebuilt when
// they pile up), and a chunk whose blocks are all free goes back.
TEST(SlabAllocator, HandsOutFromTheLowestChunkWithAFreeBlock) {
  FakeCn cn(4096, 4096, 1 << 20, 4096);
  systems::AccessGroup group(0, nullptr, 0, 0);
  SlabAllocator a(cn, group, {1024});
  std::map<uint64_t, std::set<uint64_t>> free_blocks;  // chunk -> its free blocks (model)
  std::set<uint64_t> used;
  auto alloc = [&] {
    Result<Block> r = Await(a.Alloc(1000));
    ASSERT_TRUE(r.ok()) << r.status.message();
    const uint64_t addr = r.value.addr(), chunk = addr & ~4095ull;
    if (free_blocks.empty()) {
      free_blocks[chunk] = {chunk, chunk + 1024, chunk + 2048, chunk + 3072};  // a new chunk
    }
    ASSERT_EQ(chunk, free_blocks.begin()->first) << "not the lowest chunk with a free block";
    ASSERT_EQ(free_blocks[chunk].erase(addr), 1u) << addr << " was not free";
    if (free_blocks[chunk].empty()) free_blocks.erase(chunk);
    used.insert(addr);
  };
  for (int i = 0; i < 240; ++i) alloc();
  std::mt19937_64 rng(7);
  for (int round = 0; round < 30; ++round) {
    std::vector<uint64_t> v(used.begin(), used.end());
    std::shuffle(v.begin(), v.end(), rng);
    for (size_t i = 0; i < v.size() * 3 / 5; ++i) {
      ASSERT_TRUE(Await(a.Free(v[i])).ok());
      used.erase(v[i]);
      const uint64_t chunk = v[i] & ~4095ull;
      free_blocks[chunk].insert(v[i]);
      if (free_blocks[chunk].size() == 4) free_blocks.erase(chunk);  // went back to the MN
    }
    while (used.size() < 240) alloc();
  }
  EXPECT_EQ(a.stats().blocks_in_use, 240u);
  EXPECT_EQ(a.stats().chunks_held, a.stats().chunks_allocated - cn.freed.size());
}

// Chunk 0 keeps a free block while 99 higher chunks are emptied and go back:
// their entries go stale behind chunk 0's and the heap is rebuilt (more stale
// entries than 2 x chunks held + 64). Chunk 0's block must survive that.
TEST(SlabAllocator, KeepsALowChunkWhenStaleEntriesAreDropped) {
  FakeCn cn(4096, 4096, 1 << 20, 4096);
  systems::AccessGroup group(0, nullptr, 0, 0);
  SlabAllocator a(cn, group, {1024});
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 400; ++i) blocks.push_back(Await(a.Alloc(1000)).value.addr());
  ASSERT_TRUE(Await(a.Free(blocks[1])).ok());  // chunk 0 gets a free block
  for (size_t i = 4; i < blocks.size(); ++i) ASSERT_TRUE(Await(a.Free(blocks[i])).ok());
  EXPECT_EQ(cn.freed.size(), 99u);
  EXPECT_EQ(Await(a.Alloc(1000)).value.addr(), blocks[1]);
  EXPECT_EQ(Await(a.Alloc(1000)).value.addr(), (1u << 20) + 100 * 4096);  // a new chunk
}

// A chunk smaller than the class it was taken for holds no block: the
// allocation fails naming both sizes, and the chunk goes back to the MN.
TEST(SlabAllocator, RefusesAChunkSmallerThanTheClass) {
  FakeCn cn(4096, 4096, 1 << 20, 4096);
  systems::AccessGroup group(0, nullptr, 0, 0);
  SlabAllocator a(cn, group, {1024, 4096});
  cn.chunk_bytes_ = 2048;
  Result<Block> r = Await(a.Alloc(3000));
  EXPECT_EQ(r.status.code(), Code::kUnsupported);
  EXPECT_NE(r.status.message().find("chunk of 2KB, smaller than the 4KB size class"),
            std::string::npos)
      << r.status.message();
  EXPECT_EQ(cn.freed, std::vector<uint64_t>{1u << 20});
  EXPECT_EQ(a.stats().chunks_held, 0u);
  cn.chunk_bytes_ = 4096;
  EXPECT_TRUE(Await(a.Alloc(3000)).ok());
}

}  // namespace
}  // namespace dmb::apps::kv

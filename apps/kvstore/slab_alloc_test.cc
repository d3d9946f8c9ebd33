// SlabAllocator's address lookups (Find, Free) on chunks that are not aligned
// to their size, and on chunks of another size than the approach's granularity
// (the ordered-map fallback): both must find exactly the blocks in use.
#include "apps/kvstore/slab_alloc.h"

#include <gtest/gtest.h>

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

 private:
  systems::Capabilities caps_;
  uint64_t chunk_bytes_, base_, stride_;
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

}  // namespace
}  // namespace dmb::apps::kv

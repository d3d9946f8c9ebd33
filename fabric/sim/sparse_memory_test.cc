#include "fabric/sim/sparse_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace dmb::sim {
namespace {

TEST(SparseMemory, A224GbNodeCostsOnlyTouchedPages) {
  SparseMemory mem("mn", 224ull << 30);
  EXPECT_EQ(mem.resident_bytes(), 0u);
  mem.StoreU64(200ull << 30, 0x1234);
  mem.StoreU64(1ull << 30, 0x5678);
  EXPECT_EQ(mem.LoadU64(200ull << 30), 0x1234u);
  EXPECT_EQ(mem.LoadU64(100ull << 30), 0u) << "untouched memory reads as zero";
  EXPECT_EQ(mem.resident_bytes(), 2 * SparseMemory::kPageBytes);
}

TEST(SparseMemory, AccessesSpanPages) {
  SparseMemory mem("n", 1 << 20);
  std::vector<uint8_t> in(200000), out(200000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  mem.Write(12345, in.data(), in.size());
  mem.Read(12345, out.data(), out.size());
  EXPECT_EQ(in, out);
  EXPECT_THROW(mem.Read((1 << 20) - 4, out.data(), 8), std::out_of_range);
}

TEST(SparseMemory, AllocIsAlignedAndReportsExhaustion) {
  SparseMemory mem("small", 1 << 16);
  const uint64_t a = mem.Alloc(100, 4096);
  EXPECT_EQ(a % 4096, 0u);
  EXPECT_NE(a, 0u) << "address 0 is never handed out";
  try {
    mem.Alloc(1 << 20);
    FAIL() << "expected exhaustion";
  } catch (const fabric::VerbsError& e) {
    EXPECT_NE(std::string(e.what()).find("small"), std::string::npos) << e.what();
  }
}

TEST(SparseMemory, FreeZeroesTheRangeDropsWholePagesAndRefusesDoubleFrees) {
  SparseMemory mem("mn", 1 << 24);
  const uint64_t keep = mem.Alloc(64, 64);
  mem.StoreU64(keep, 7);
  const uint64_t a = mem.Alloc(3 * SparseMemory::kPageBytes, SparseMemory::kPageBytes);
  mem.Fill(a, 0xAB, 3 * SparseMemory::kPageBytes);
  const uint64_t resident = mem.resident_bytes();
  EXPECT_EQ(mem.in_use_bytes(), 64 + 3 * SparseMemory::kPageBytes);
  mem.Free(a, 3 * SparseMemory::kPageBytes);
  EXPECT_EQ(mem.in_use_bytes(), 64u);
  EXPECT_EQ(mem.resident_bytes(), resident - 3 * SparseMemory::kPageBytes);
  EXPECT_THROW(mem.Free(a, 3 * SparseMemory::kPageBytes), std::invalid_argument);
  // A range inside one page is zeroed in place; a new Alloc reads zero.
  const uint64_t b = mem.Alloc(100, 64);
  mem.Fill(b, 0xCD, 100);
  mem.Free(b, 100);
  EXPECT_EQ(mem.Alloc(100, 64), b);
  std::vector<uint8_t> got(100, 1);
  mem.Read(b, got.data(), got.size());
  EXPECT_EQ(got, std::vector<uint8_t>(100, 0));
  EXPECT_EQ(mem.LoadU64(keep), 7u) << "a neighbour's bytes survive";
}

// Pages come zeroed from the pool, stay distinct across its mappings, and a
// page given back (dirty) is zeros when it is taken again.
TEST(PagePool, PagesAreZeroDistinctAndZeroAgainAfterGive) {
  PagePool pool(SparseMemory::kPageBytes, /*pages_per_map=*/2);
  std::vector<uint8_t*> pages;
  for (int i = 0; i < 5; ++i) {
    uint8_t* p = pool.Take();
    for (uint64_t b = 0; b < pool.page_bytes(); b += 4096) ASSERT_EQ(p[b], 0) << "page " << i;
    std::memset(p, 0xA0 + i, pool.page_bytes());
    pages.push_back(p);
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    EXPECT_EQ(pages[i][pool.page_bytes() - 1], 0xA0 + i) << "pages overlap";
  }
  pool.Give(pages[3]);
  uint8_t* again = pool.Take();
  EXPECT_EQ(again, pages[3]);
  EXPECT_EQ(std::count(again, again + pool.page_bytes(), 0), static_cast<long>(pool.page_bytes()));
}

}  // namespace
}  // namespace dmb::sim

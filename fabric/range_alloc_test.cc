#include "fabric/range_alloc.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "fabric/node.h"

namespace dmb::fabric {
namespace {

TEST(RangeAllocator, WithoutFreesLaysOutAsBumpAlloc) {
  RangeAllocator r("n", 4096, 1 << 20);
  uint64_t next = 4096;
  for (uint64_t bytes : {1u, 100u, 4096u, 7u, 64u}) {
    for (uint64_t align : {1u, 64u, 4096u}) {
      EXPECT_EQ(r.Alloc(bytes, align), BumpAlloc(&next, 1 << 20, bytes, align, "n"));
    }
  }
  EXPECT_EQ(r.top(), next);
}

TEST(RangeAllocator, FreedRangesAreReusedAndCoalesced) {
  RangeAllocator r("n", 4096, 1 << 20);
  const uint64_t a = r.Alloc(4096, 4096), b = r.Alloc(4096, 4096), c = r.Alloc(64, 64);
  const uint64_t top = r.top();
  EXPECT_EQ(r.in_use_bytes(), 8192u + 64u);
  r.Free(a, 4096);
  r.Free(b, 4096);
  EXPECT_EQ(r.free_ranges(), 1u);  // a and b merged
  EXPECT_EQ(r.in_use_bytes(), 64u);
  EXPECT_EQ(r.Alloc(8192, 4096), a);  // the merged range, not new space
  EXPECT_EQ(r.top(), top);
  r.Free(c, 64);  // the highest allocation: the top shrinks instead
  EXPECT_EQ(r.top(), c);
  EXPECT_EQ(r.Alloc(64, 64), c);
}

TEST(RangeAllocator, AllocFreeCyclesKeepTheFootprintFlat) {
  RangeAllocator r("n", 4096, 1 << 24);
  (void)r.Alloc(100, 64);  // something that stays
  uint64_t top = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = r.Alloc(40000, 4096), y = r.Alloc(136, 64), z = r.Alloc(9000, 4096);
    r.Free(y, 136);
    r.Free(x, 40000);
    r.Free(z, 9000);
    if (i == 0) top = r.top();
    ASSERT_EQ(r.top(), top) << "cycle " << i;
  }
  EXPECT_EQ(r.in_use_bytes(), 100u);
}

TEST(RangeAllocator, RefusesDoubleAndPartialFrees) {
  RangeAllocator r("mn", 4096, 1 << 20);
  const uint64_t a = r.Alloc(256, 64);
  (void)r.Alloc(64, 64);
  EXPECT_THROW(r.Free(a, 128), std::invalid_argument);
  EXPECT_THROW(r.Free(a + 64, 64), std::invalid_argument);
  r.Free(a, 256);
  EXPECT_THROW(r.Free(a, 256), std::invalid_argument);
}

TEST(RangeAllocator, ExhaustionIsEnomemNamingTheNode) {
  RangeAllocator r("mn", 4096, 8192);
  (void)r.Alloc(4096, 64);
  try {
    (void)r.Alloc(1, 64);
    FAIL() << "no ENOMEM";
  } catch (const VerbsError& e) {
    EXPECT_EQ(e.err(), ENOMEM);
    EXPECT_NE(std::string(e.what()).find("'mn'"), std::string::npos);
  }
}

}  // namespace
}  // namespace dmb::fabric

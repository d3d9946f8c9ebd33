// CgroupMemory: LRU, memory.high reclaim decisions, slot lifetime and
// readahead, on hand-worked cases.
#include "apps/swap/cgroup_memory.h"

#include <gtest/gtest.h>

#include <vector>

namespace dmb::apps::swap {
namespace {

constexpr uint64_t C = kClusterSlots;

// 16 clusters, start column 1: free clusters 1, 2, ..., 15.
SwapSpaceSpec Space(uint64_t clusters = 16, uint32_t cpus = 2, bool cache = true) {
  SwapSpaceSpec s;
  s.area.pages = clusters * C;
  s.area.cpus = cpus;
  s.area.cluster_next = C;
  s.slot_cache = cache;
  return s;
}

CgroupSpec Cg(uint64_t pages, uint64_t high) {
  CgroupSpec c;
  c.pages = pages;
  c.high_pages = high;
  c.reclaim_cpu = 1;
  return c;
}

void TouchAll(CgroupMemory& cg, uint64_t first, uint64_t n, bool write = true) {
  for (uint64_t p = first; p < first + n; ++p) cg.Touch(p, write, 0);
}

std::vector<uint64_t> Pages(const std::vector<SwapIo>& io) {
  std::vector<uint64_t> v;
  for (const SwapIo& x : io) v.push_back(x.page);
  return v;
}

TEST(CgroupMemoryTest, OverHighTheReclaimCoreEvictsABatchFromTheLruEnd) {
  SwapSpace space(Space());
  CgroupMemory cg(space, Cg(64, 40));
  TouchAll(cg, 0, 40);
  EXPECT_EQ(cg.Need().mode, ReclaimMode::kNone);
  EXPECT_EQ(cg.Touch(40, true, 0).fault, Fault::kFirstTouch);
  ReclaimNeed need = cg.Need();
  EXPECT_EQ(need.mode, ReclaimMode::kBackground);
  EXPECT_EQ(need.pages, 32u);  // one SWAP_CLUSTER_MAX batch
  ReclaimResult r = cg.Reclaim(cg.spec().reclaim_cpu, need.pages);
  ASSERT_EQ(r.writes.size(), 32u);
  for (uint64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(r.writes[i].page, i);
    EXPECT_EQ(r.writes[i].slot, C + i);  // the reclaim CPU's cluster, in order
  }
  EXPECT_EQ(space.map().PercpuCluster(1), 1u);
  EXPECT_FALSE(space.map().PercpuCluster(0).has_value());
  EXPECT_EQ(cg.resident_pages(), 9u);
  EXPECT_EQ(cg.Need().mode, ReclaimMode::kNone);
}

TEST(CgroupMemoryTest, TouchesReorderTheLru) {
  SwapSpace space(Space());
  CgroupMemory cg(space, Cg(8, 100));
  TouchAll(cg, 0, 5);
  EXPECT_EQ(cg.Touch(0, false, 0).fault, Fault::kHit);
  EXPECT_EQ(Pages(cg.Reclaim(1, 2).writes), (std::vector<uint64_t>{1, 2}));
}

TEST(CgroupMemoryTest, FarOverHighTheApplicationReclaimsDirectly) {
  SwapSpace space(Space());
  CgroupSpec spec = Cg(32, 4);
  spec.direct_reclaim_over_pages = 8;
  spec.reclaim_batch_pages = 4;
  CgroupMemory cg(space, spec);
  TouchAll(cg, 0, 12);  // 8 over: still the reclaim core's job
  EXPECT_EQ(cg.Need().mode, ReclaimMode::kBackground);
  EXPECT_EQ(cg.Need().pages, 8u);
  cg.Touch(12, true, 0);  // 9 over
  EXPECT_EQ(cg.Need().mode, ReclaimMode::kDirect);
  EXPECT_EQ(cg.Need().pages, 4u);  // the excess past the threshold, in batches
  cg.Reclaim(0, 4);                // on the faulting CPU
  EXPECT_EQ(space.map().PercpuCluster(0), 1u);
  EXPECT_EQ(cg.Need().mode, ReclaimMode::kBackground);
}

TEST(CgroupMemoryTest, CleanPageKeepsItsSlotAndIsDroppedForFree) {
  SwapSpace space(Space());
  CgroupMemory cg(space, Cg(8, 100));
  cg.Touch(0, true, 0);
  uint64_t s = cg.Reclaim(1, 1).writes.at(0).slot;
  TouchResult t = cg.Touch(0, false, 0);
  EXPECT_EQ(t.fault, Fault::kMajor);
  EXPECT_EQ(t.sync_read_slot, s);
  EXPECT_EQ(cg.slot(0), s);
  EXPECT_FALSE(cg.dirty(0));
  ReclaimResult r = cg.Reclaim(1, 1);
  EXPECT_TRUE(r.writes.empty());
  EXPECT_EQ(r.clean_dropped, 1u);
  EXPECT_EQ(cg.state(0), PageState::kSwapped);
  EXPECT_EQ(cg.slot(0), s);
  EXPECT_EQ(cg.Touch(0, false, 0).sync_read_slot, s);
}

TEST(CgroupMemoryTest, WriteAfterSwapInFreesTheSlotThroughTheCpuCache) {
  SwapSpace space(Space());
  CgroupMemory cg(space, Cg(8, 100));
  TouchAll(cg, 0, 2);
  std::vector<SwapIo> w = cg.Reclaim(1, 2).writes;
  EXPECT_EQ(cg.Touch(0, true, 0).fault, Fault::kMajor);  // write fault
  EXPECT_FALSE(cg.slot(0).has_value());
  EXPECT_TRUE(cg.dirty(0));
  cg.Touch(1, false, 0);  // read fault keeps the slot ...
  EXPECT_EQ(cg.slot(1), w[1].slot);
  cg.Touch(1, true, 0);  // ... until the first write
  EXPECT_FALSE(cg.slot(1).has_value());
  EXPECT_EQ(cg.slots_held(), 0u);
  EXPECT_TRUE(space.map().InUse(w[0].slot));  // parked in CPU 0's cache
  EXPECT_TRUE(space.TakeReleased().empty());
  space.slots().DrainReturns(0);
  EXPECT_EQ(space.TakeReleased(), (std::vector<uint64_t>{w[0].slot, w[1].slot}));
  // Re-eviction of a dirtied page needs a new write.
  EXPECT_EQ(cg.Reclaim(1, 1).writes.size(), 1u);
}

TEST(CgroupMemoryTest, SwapInFreesTheSlotWhenSwapIsMoreThanHalfFull) {
  SwapSpace space(Space(4, 1, /*cache=*/false));  // 1023 usable slots
  CgroupMemory cg(space, Cg(600, 1000));
  TouchAll(cg, 0, 600);
  cg.Reclaim(0, 511);
  ASSERT_FALSE(space.map().SwapFull());  // 512 free of 1023
  cg.Touch(0, false, 0);
  EXPECT_TRUE(cg.slot(0).has_value());
  cg.Reclaim(0, 2);  // page 511 (written) and page 512
  ASSERT_TRUE(space.map().SwapFull());
  cg.Touch(1, false, 0);
  EXPECT_FALSE(cg.slot(1).has_value());
  EXPECT_TRUE(cg.dirty(1));
}

TEST(CgroupMemoryTest, MajorFaultReadsTheAlignedWindowAhead) {
  SwapSpace space(Space());
  CgroupMemory cg(space, Cg(16, 100));
  TouchAll(cg, 0, 16);
  cg.Reclaim(1, 16);  // pages 0..15 -> slots C..C+15
  TouchResult t = cg.Touch(3, false, 0);
  EXPECT_EQ(t.sync_read_slot, C + 3);
  EXPECT_EQ(Pages(t.readahead), (std::vector<uint64_t>{0, 1, 2, 4, 5, 6, 7}));  // window of 8
  EXPECT_EQ(t.readahead[0].slot, C);
  EXPECT_EQ(cg.resident_pages(), 8u);
  EXPECT_EQ(cg.Touch(5, false, 0).fault, Fault::kSwapCacheHit);
  EXPECT_EQ(space.readahead().hits(), 1u);
  t = cg.Touch(12, false, 0);  // 1 hit: window of 4, [C+12, C+15]
  EXPECT_EQ(Pages(t.readahead), (std::vector<uint64_t>{13, 14, 15}));
  // Read-ahead pages never touched are clean and drop without I/O.
  ReclaimResult r = cg.Reclaim(1, 100);
  EXPECT_TRUE(r.writes.empty());
  EXPECT_EQ(r.clean_dropped, 12u);
}

TEST(CgroupMemoryTest, ReadaheadReachesOtherTasksPagesAndSkipsFreedSlots) {
  SwapSpace space(Space());
  CgroupMemory a(space, Cg(4, 100)), b(space, Cg(4, 100));
  TouchAll(a, 0, 2);
  TouchAll(b, 0, 2);
  a.Touch(0, false, 0);  // LRU order: a1 a0 ; b0 b1
  for (int i = 0; i < 2; ++i) {
    a.Reclaim(1, 1);
    b.Reclaim(1, 1);
  }
  // Slots: C a1, C+1 b0, C+2 a0, C+3 b1.
  ASSERT_EQ(a.slot(0), C + 2);
  b.Unmap(1, 1, 0);  // frees C+3
  TouchResult t = a.Touch(0, false, 0);
  ASSERT_EQ(t.readahead.size(), 2u);  // in slot order
  EXPECT_EQ(t.readahead[0].cgroup, a.id());
  EXPECT_EQ(t.readahead[0].page, 1u);
  EXPECT_EQ(t.readahead[0].slot, C);
  EXPECT_EQ(t.readahead[1].cgroup, b.id());
  EXPECT_EQ(t.readahead[1].page, 0u);
  EXPECT_EQ(t.readahead[1].slot, C + 1);
  EXPECT_EQ(b.state(0), PageState::kResident);
  EXPECT_EQ(b.resident_pages(), 1u);  // charged to its owner
  EXPECT_EQ(b.Touch(0, false, 0).fault, Fault::kSwapCacheHit);
}

TEST(CgroupMemoryTest, UnmapAndExitFreeSlotsAndUncharge) {
  SwapSpace space(Space());
  CgroupMemory cg(space, Cg(16, 100));
  TouchAll(cg, 0, 16);
  cg.Reclaim(1, 10);
  cg.Unmap(0, 4, 0);  // 4 swapped pages
  EXPECT_EQ(cg.slots_held(), 6u);
  EXPECT_EQ(cg.state(2), PageState::kNone);
  EXPECT_EQ(cg.Touch(2, false, 0).fault, Fault::kFirstTouch);  // a fresh page
  cg.Exit(0);
  EXPECT_EQ(cg.slots_held(), 0u);
  EXPECT_EQ(cg.resident_pages(), 0u);
  space.slots().DrainReturns(0);
  EXPECT_EQ(space.TakeReleased().size(), 10u);
  EXPECT_EQ(space.map().inuse_pages(), space.slots().cached(1));  // only CPU 1's unused batch
}

TEST(CgroupMemoryTest, FullSwapKeepsVictimsResident) {
  SwapSpace space(Space(2, 1, /*cache=*/false));  // 511 usable slots
  CgroupMemory cg(space, Cg(600, 10));
  TouchAll(cg, 0, 600);
  ReclaimResult r = cg.Reclaim(0, 600);
  EXPECT_EQ(r.writes.size(), 511u);
  EXPECT_EQ(r.no_slot, 89u);
  EXPECT_EQ(cg.resident_pages(), 89u);
}

}  // namespace
}  // namespace dmb::apps::swap

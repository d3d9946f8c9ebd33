// SwapMap and SwapSlots against cases worked out by hand from Linux 4.15's
// mm/swapfile.c and mm/swap_slots.c.
#include "apps/swap/swap_slots.h"

#include <gtest/gtest.h>

#include <vector>

#include "apps/swap/swap_map.h"

namespace dmb::apps::swap {
namespace {

constexpr uint64_t C = kClusterSlots;

SwapAreaSpec Ssd(uint64_t clusters, uint32_t cpus, uint64_t start_col) {
  SwapAreaSpec s;
  s.pages = clusters * C;
  s.cpus = cpus;
  s.cluster_next = start_col * C + 5;
  return s;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t n) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

TEST(SwapMapTest, InitialFreeListIsInterleavedFromTheStartColumn) {
  SwapMap m(Ssd(130, 1, 62));
  std::vector<uint32_t> list = m.FreeClusterList();
  // Columns 62, 63, 0, 1, ...; column j = clusters j, j+64, j+128 (< 130);
  // cluster 0 holds the header and is not free.
  std::vector<uint32_t> head(list.begin(), list.begin() + 13);
  EXPECT_EQ(head, (std::vector<uint32_t>{62, 126, 63, 127, 64, 128, 1, 65, 129, 2, 66, 3, 67}));
  EXPECT_EQ(list.size(), 129u);
  EXPECT_EQ(list.back(), 125u);  // column 61 ends the list: 61, 125
  EXPECT_EQ(m.usable_pages(), 130 * C - 1);
}

TEST(SwapMapTest, StartColumnComesFromTheSeedAndPartialTailClusterIsNotFree) {
  SwapAreaSpec s;
  s.pages = 3 * C + 10;
  s.cluster_next = 1;
  SwapMap m(s);
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(m.ClusterCount(3), C - 10);  // the 246 missing slots count as used
  // Different seeds pick different start columns.
  SwapAreaSpec a = Ssd(256, 1, 0), b = a;
  a.cluster_next.reset();
  b.cluster_next.reset();
  a.seed = 1;
  b.seed = 2;
  EXPECT_NE(SwapMap(a).FreeClusterList().front(), SwapMap(b).FreeClusterList().front());
}

TEST(SwapMapTest, EachCpuFillsItsOwnClusterInOrder) {
  SwapMap m(Ssd(130, 2, 62));
  EXPECT_EQ(m.AllocSlots(0, 1), std::vector<uint64_t>{62 * C});
  EXPECT_EQ(m.AllocSlots(1, 1), std::vector<uint64_t>{126 * C});
  EXPECT_EQ(m.AllocSlots(0, 3), Range(62 * C + 1, 3));
  EXPECT_EQ(m.PercpuCluster(0), 62u);
  EXPECT_EQ(m.PercpuCluster(1), 126u);
  EXPECT_EQ(m.FreeClusterList().front(), 63u);
  EXPECT_EQ(m.inuse_pages(), 5u);
}

TEST(SwapMapTest, BatchCarriesOnIntoTheNextFreeCluster) {
  SwapMap m(Ssd(130, 1, 62));
  m.AllocSlots(0, 10);
  for (int i = 0; i < 3; ++i) m.AllocSlots(0, 64);  // 202 slots of cluster 62
  std::vector<uint64_t> want = Range(62 * C + 202, 54);
  for (uint64_t s : Range(126 * C, 10)) want.push_back(s);
  EXPECT_EQ(m.AllocSlots(0, 64), want);
  EXPECT_EQ(m.AllocSlots(0, 100).size(), 64u);  // SWAP_BATCH caps a scan
}

TEST(SwapMapTest, FreedClusterJoinsTheTailOfTheFreeList) {
  SwapMap m(Ssd(4, 3, 0));
  ASSERT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{1, 2, 3}));
  for (int i = 0; i < 4; ++i) m.AllocSlots(0, 64);  // all of cluster 1
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{2, 3}));
  m.FreeEntries(Range(C, C));
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{2, 3, 1}));
  EXPECT_EQ(m.AllocSlots(0, 1), std::vector<uint64_t>{2 * C});
  EXPECT_EQ(m.AllocSlots(1, 1), std::vector<uint64_t>{3 * C});
  EXPECT_EQ(m.AllocSlots(2, 1), std::vector<uint64_t>{1 * C});
}

TEST(SwapMapTest, CpuDropsItsClusterOnceItTurnsFreeBehindTheHead) {
  SwapMap m(Ssd(4, 1, 0));
  EXPECT_EQ(m.AllocSlots(0, 2), Range(C, 2));
  m.FreeEntries({C, C + 1});
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{2, 3, 1}));
  // Slot C+2 is free in the CPU's cluster, but cluster 1 is free and not the
  // head: the conflict check sends the CPU to the head.
  EXPECT_EQ(m.AllocSlots(0, 1), std::vector<uint64_t>{2 * C});
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{3, 1}));
}

TEST(SwapMapTest, WithoutFreeClustersTheScanSkipsClusterNext) {
  SwapMap m(Ssd(2, 1, 0));  // cluster 0 (header) + cluster 1
  for (int i = 0; i < 4; ++i) m.AllocSlots(0, 64);
  ASSERT_TRUE(m.FreeClusterList().empty());
  // Only the linear scan reaches cluster 0's slots; it starts one past
  // cluster_next, and a scan ends a batch after one slot.
  EXPECT_EQ(m.AllocSlots(0, 64), std::vector<uint64_t>{1});
  EXPECT_EQ(m.AllocSlots(0, 64), std::vector<uint64_t>{3});
  EXPECT_EQ(m.AllocSlots(0, 64), std::vector<uint64_t>{5});
}

TEST(SwapMapTest, FullAreaGivesNothingAndFreeingRefills) {
  SwapMap m(Ssd(2, 1, 0));
  uint64_t got = 0;
  for (int i = 0; i < 1000; ++i) got += m.AllocSlots(0, 64).size();
  EXPECT_EQ(got, m.usable_pages());
  EXPECT_TRUE(m.AllocSlots(0, 64).empty());
  EXPECT_TRUE(m.SwapFull());
  m.FreeEntries({300});
  EXPECT_EQ(m.AllocSlots(0, 64), std::vector<uint64_t>{300});
}

TEST(SwapMapTest, RotationalFillsBottomUpRunsOf256) {
  SwapAreaSpec s;
  s.pages = 4 * C;
  s.rotational = true;
  SwapMap m(s);
  EXPECT_EQ(m.AllocSlots(0, 1), std::vector<uint64_t>{1});
  // One global cursor: the CPU does not matter, a batch continues the run.
  EXPECT_EQ(m.AllocSlots(1, 2), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(m.AllocSlots(0, 64), Range(4, 64));
  m.FreeEntries({2});
  uint64_t last = 0;
  while (last < C) last = m.AllocSlots(0, 1).at(0);  // the rest of the run 1..256
  EXPECT_EQ(last, C);
  // The next run is the first 256 free slots from lowest_bit: freed slot 2
  // is not reused while such a run exists.
  EXPECT_EQ(m.AllocSlots(0, 1), std::vector<uint64_t>{C + 1});
  EXPECT_FALSE(m.InUse(2));
}

TEST(SwapSlotsTest, CpuCacheHandsOutOneBatchOfSixtyFour) {
  SwapMap m(Ssd(130, 2, 62));
  SwapSlots slots(m);
  EXPECT_EQ(slots.GetSwapPage(0), 62 * C);
  EXPECT_TRUE(slots.active());
  EXPECT_EQ(m.inuse_pages(), 64u);  // the whole batch left the map
  EXPECT_EQ(slots.cached(0), 63u);
  for (uint64_t i = 1; i < 64; ++i) EXPECT_EQ(slots.GetSwapPage(0), 62 * C + i);
  EXPECT_EQ(slots.refills(), 1u);
  EXPECT_EQ(slots.GetSwapPage(0), 62 * C + 64);
  EXPECT_EQ(slots.refills(), 2u);
  EXPECT_EQ(m.inuse_pages(), 128u);
  EXPECT_EQ(slots.GetSwapPage(1), 126 * C);  // another CPU, another cluster
}

TEST(SwapSlotsTest, FreesAreParkedAndGivenBackSixtyFourAtATime) {
  SwapMap m(Ssd(130, 2, 62));
  SwapSlots slots(m);
  std::vector<uint64_t> got;
  for (int i = 0; i < 65; ++i) got.push_back(*slots.GetSwapPage(0));
  ASSERT_EQ(m.inuse_pages(), 128u);
  for (int i = 64; i >= 1; --i) slots.FreeSwapSlot(1, got[i]);  // reverse order
  EXPECT_TRUE(slots.TakeReleased().empty());
  EXPECT_EQ(slots.parked(1), 64u);
  EXPECT_EQ(m.inuse_pages(), 128u);  // parked slots stay in use
  EXPECT_TRUE(m.InUse(got[64]));
  slots.FreeSwapSlot(1, got[0]);
  EXPECT_EQ(slots.TakeReleased(), Range(62 * C + 1, 64));  // sorted
  EXPECT_EQ(slots.parked(1), 1u);
  EXPECT_EQ(m.inuse_pages(), 64u);
}

TEST(SwapSlotsTest, ParkedSlotsKeepTheirClusterOffTheFreeList) {
  SwapMap m(Ssd(4, 1, 0));
  SwapSlots slots(m);
  std::vector<uint64_t> got;
  for (uint64_t i = 0; i < C; ++i) got.push_back(*slots.GetSwapPage(0));
  ASSERT_EQ(got, Range(C, C));
  for (uint64_t s : got) slots.FreeSwapSlot(0, s);
  EXPECT_EQ(slots.TakeReleased().size(), 192u);
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{2, 3}));
  slots.DrainReturns(0);
  EXPECT_EQ(slots.TakeReleased(), Range(C + 192, 64));
  EXPECT_EQ(m.FreeClusterList(), (std::vector<uint32_t>{2, 3, 1}));
}

TEST(SwapSlotsTest, InactiveWhenSwapIsSmallAndDeactivatesNearFull) {
  SwapMap small(Ssd(4, 4, 0));  // 1023 free < 5 * 64 * 4
  SwapSlots a(small);
  EXPECT_EQ(a.GetSwapPage(0), C);
  EXPECT_FALSE(a.active());
  EXPECT_EQ(small.inuse_pages(), 1u);

  SwapMap m(Ssd(4, 1, 0));  // activate above 320 free, deactivate below 128
  SwapSlots b(m);
  uint64_t handed = 0;
  ASSERT_TRUE(b.GetSwapPage(0).has_value());
  ++handed;
  ASSERT_TRUE(b.active());
  while (b.active()) {
    ASSERT_TRUE(b.GetSwapPage(0).has_value());
    ++handed;
  }
  EXPECT_EQ(m.inuse_pages(), handed);  // the unused cached slots went back
  EXPECT_LT(m.free_pages(), 128u + 64u);
}

TEST(SwapSlotsTest, DisabledCacheAllocatesAndFreesOneByOne) {
  SwapMap m(Ssd(4, 1, 0));
  SwapSlots slots(m, /*enabled=*/false);
  EXPECT_EQ(slots.GetSwapPage(0), C);
  EXPECT_EQ(m.inuse_pages(), 1u);
  slots.FreeSwapSlot(0, C);
  EXPECT_EQ(slots.TakeReleased(), std::vector<uint64_t>{C});
  EXPECT_EQ(m.inuse_pages(), 0u);
}

}  // namespace
}  // namespace dmb::apps::swap

// SwapReadahead against windows worked out by hand from Linux 4.15's
// __swapin_nr_pages() and swapin_readahead().
#include "apps/swap/readahead.h"

#include <gtest/gtest.h>

namespace dmb::apps::swap {
namespace {

constexpr uint64_t kMax = 1 << 20;

void ExpectWindow(SwapReadahead& ra, uint64_t offset, uint64_t first, uint64_t last,
                  uint32_t pages) {
  ReadaheadWindow w = ra.Window(offset, kMax);
  EXPECT_EQ(w.first, first) << "offset " << offset;
  EXPECT_EQ(w.last, last) << "offset " << offset;
  EXPECT_EQ(w.pages, pages) << "offset " << offset;
}

TEST(SwapReadaheadTest, StartsWideThenHalvesWithoutHits) {
  SwapReadahead ra;
  ExpectWindow(ra, 21, 16, 23, 8);     // hits start at 4: 4 + 2 -> 8
  ExpectWindow(ra, 100, 100, 103, 4);  // no hits, not adjacent: 1, but >= 8 / 2
  ExpectWindow(ra, 301, 300, 301, 2);  // >= 4 / 2
  ExpectWindow(ra, 503, 503, 503, 1);  // >= 2 / 2: no readahead
  ExpectWindow(ra, 777, 777, 777, 1);
}

TEST(SwapReadaheadTest, AdjacentFaultReadsTwo) {
  SwapReadahead ra;
  ra.Window(5000, kMax);  // 8
  ra.Window(6000, kMax);  // 4
  ra.Window(7000, kMax);  // 2
  ra.Window(8000, kMax);  // 1, prev_offset 8000
  ExpectWindow(ra, 8001, 8000, 8001, 2);
  ExpectWindow(ra, 8000, 8000, 8001, 2);  // prev_offset is now 8001: 8000 is adjacent too
}

TEST(SwapReadaheadTest, HitsGrowTheWindowInPowersOfTwoUpToPageCluster) {
  SwapReadahead ra;
  ra.Window(5000, kMax);
  ra.Window(6000, kMax);
  ra.Window(7000, kMax);
  ra.Window(8000, kMax);  // window 1
  ra.Hit();
  ExpectWindow(ra, 9001, 9000, 9003, 4);  // 1 + 2 = 3 -> 4
  for (int i = 0; i < 3; ++i) ra.Hit();
  ExpectWindow(ra, 9013, 9008, 9015, 8);  // 3 + 2 = 5 -> 8
  for (int i = 0; i < 20; ++i) ra.Hit();
  ExpectWindow(ra, 9013, 9008, 9015, 8);  // capped at 2^3
  EXPECT_EQ(ra.hits(), 0u);
}

TEST(SwapReadaheadTest, HitsKeepPrevOffsetOfTheLastMissWithoutHits) {
  SwapReadahead ra;  // first window has hits (the initial 4): prev stays 0
  ra.Window(50, kMax);
  ra.Window(60, kMax);  // 4, prev 60
  ra.Window(70, kMax);  // 2, prev 70
  ra.Window(80, kMax);  // 1, prev 80
  ra.Hit();
  ra.Window(500, kMax);                // hits: prev stays 80
  ra.Window(600, kMax);                // 2 (>= 4 / 2), prev 600
  ExpectWindow(ra, 900, 900, 900, 1);  // not adjacent to 600
  ExpectWindow(ra, 899, 898, 899, 2);  // adjacent to 900
}

TEST(SwapReadaheadTest, WindowSkipsTheHeaderAndStopsAtTheEnd) {
  SwapReadahead a;
  ReadaheadWindow w = a.Window(3, kMax);
  EXPECT_EQ(w.first, 1u);
  EXPECT_EQ(w.last, 7u);
  SwapReadahead b;
  w = b.Window(1021, 1022);
  EXPECT_EQ(w.first, 1016u);
  EXPECT_EQ(w.last, 1021u);
}

TEST(SwapReadaheadTest, PageClusterZeroNeverReadsAhead) {
  SwapReadahead ra(0);
  for (int i = 0; i < 10; ++i) ra.Hit();
  ExpectWindow(ra, 21, 21, 21, 1);
  SwapReadahead two(2);
  ExpectWindow(two, 21, 20, 23, 4);  // 6 -> 8, capped at 4
}

}  // namespace
}  // namespace dmb::apps::swap

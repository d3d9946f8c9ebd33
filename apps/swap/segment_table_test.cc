// SegmentTable: address-aligned segments, counts, and when a segment must be
// mapped or may be freed under each policy.
#include "apps/swap/segment_table.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dmb::apps::swap {
namespace {

TEST(SegmentTableTest, SlotsMapToAlignedSegmentsAndOffsets) {
  SegmentTable t(1000, 256, SegmentPolicy::kLazy);
  EXPECT_EQ(t.segments(), 4u);  // 1000 slots in 256-slot segments: the last partial
  EXPECT_EQ(t.SegmentOf(255), 0u);
  EXPECT_EQ(t.SegmentOf(256), 1u);
  EXPECT_EQ(t.OffsetBytes(257), 4096u);
  EXPECT_EQ(t.OffsetBytes(999), (999u - 768u) * 4096u);
}

TEST(SegmentTableTest, FirstStoreNeedsAMappingLastReleaseFreesLazily) {
  SegmentTable t(1024, 256, SegmentPolicy::kLazy);
  EXPECT_TRUE(t.Store(10));  // segment 0 not mapped yet
  t.MarkMapped(0, true);
  EXPECT_FALSE(t.Store(11));
  EXPECT_TRUE(t.Store(300));  // segment 1
  EXPECT_EQ(t.stored_slots(), 3u);
  EXPECT_EQ(t.stored_mapped_slots(), 2u);  // slot 300 stored before segment 1 was mapped
  t.MarkMapped(1, true);
  EXPECT_EQ(t.stored_mapped_slots(), 3u);
  EXPECT_EQ(t.mapped_segments(), 2u);
  EXPECT_FALSE(t.Release(10));  // 11 still there
  EXPECT_TRUE(t.Release(11));   // segment 0 empty: free it
  EXPECT_EQ(t.stored(0), 0u);
  EXPECT_EQ(t.stored(1), 1u);
}

TEST(SegmentTableTest, KeepAndWholeNeverFree) {
  for (SegmentPolicy p : {SegmentPolicy::kKeep, SegmentPolicy::kWhole}) {
    SegmentTable t(512, 256, p);
    EXPECT_TRUE(t.Store(5));
    t.MarkMapped(0, true);
    EXPECT_FALSE(t.Release(5));
    EXPECT_EQ(t.mapped_segments(), 1u);
  }
}

TEST(SegmentTableTest, PageSizedSegmentsAreOneSlotEach) {
  SegmentTable t(64, 1, SegmentPolicy::kLazy);  // ODRP: 4 KB chunks
  EXPECT_EQ(t.segments(), 64u);
  EXPECT_TRUE(t.Store(7));
  t.MarkMapped(7, true);
  EXPECT_TRUE(t.Release(7));
}

TEST(SegmentTableTest, DoubleStoreAndStrayReleaseAreBugsNamed) {
  SegmentTable t(512, 256, SegmentPolicy::kLazy);
  t.Store(3);
  EXPECT_THROW(t.Store(3), std::logic_error);
  EXPECT_THROW(t.Release(4), std::logic_error);
  EXPECT_THROW(ParseSegmentPolicy("sometimes"), std::invalid_argument);
  EXPECT_EQ(ParseSegmentPolicy("whole"), SegmentPolicy::kWhole);
}

}  // namespace
}  // namespace dmb::apps::swap

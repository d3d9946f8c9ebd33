#include "fabric/histogram.h"

#include <gtest/gtest.h>

namespace dmb {
namespace {

TEST(Histogram, PercentilesWithinOneSixtyFourth) {
  Histogram h;
  for (Ps v = 1; v <= 100000; ++v) h.Record(v * 1000);
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_NEAR(h.Percentile(0.5), 50000.0 * 1000, 50000.0 * 1000 / 64);
  EXPECT_NEAR(h.Percentile(0.99), 99000.0 * 1000, 99000.0 * 1000 / 64);
  EXPECT_DOUBLE_EQ(h.mean(), 50000.5 * 1000);
  EXPECT_EQ(h.min(), 1000);
  EXPECT_EQ(h.max(), 100000 * 1000);
}

TEST(Histogram, MergeEqualsRecordingTogether) {
  Histogram a, b, all;
  for (Ps v = 0; v < 1000; ++v) {
    (v % 2 ? a : b).Record(v * 7);
    all.Record(v * 7);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.Percentile(0.9), all.Percentile(0.9));
  EXPECT_EQ(a.min(), all.min());
}

TEST(Histogram, EmptyIsZero) {
  Histogram h;
  EXPECT_EQ(h.Percentile(0.99), 0);
  EXPECT_EQ(h.mean(), 0.0);
}

}  // namespace
}  // namespace dmb

// TraceRecorder epochs and coalescing, the binary form, and the on-disk
// cache.
#include "apps/swap/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "apps/swap/kmeans.h"
#include "apps/swap/trace_cache.h"
#include "apps/swap/traced_array.h"
#include "apps/swap/workloads.h"

namespace dmb::apps::swap {
namespace {

constexpr uint64_t P = kPageBytes;
using Op = TraceOp;

std::vector<TraceEvent> Touches(const Trace& t) {
  std::vector<TraceEvent> v;
  for (const TraceEvent& e : t.events) {
    if (e.op == Op::kRead || e.op == Op::kWrite) v.push_back(e);
  }
  return v;
}

TEST(TraceRecorderTest, EpochIsEmittedSortedAndCoalescedWithWritesWinning) {
  TraceRecorder rec({.threads = 1, .epoch_pages = 16});
  uint64_t a = rec.Map(8 * P);
  rec.Touch(0, a + 3 * P, 8, false);
  rec.Touch(0, a + 1 * P, 8, false);
  rec.Touch(0, a + 2 * P + 100, 8, false);
  rec.Touch(0, a + 2 * P, 8, true);
  rec.Touch(0, a + 5 * P - 4, 8, false);  // spans pages 4 and 5
  Trace t = rec.Finish();
  std::vector<TraceEvent> want = {
      {Op::kRead, 0, 1, 1}, {Op::kWrite, 0, 1, 2}, {Op::kRead, 0, 3, 3}};
  EXPECT_EQ(Touches(t), want);
  EXPECT_EQ(t.events.front(), (TraceEvent{Op::kMap, 0, 8, 0}));
  EXPECT_EQ(t.address_pages, 8u);
  EXPECT_EQ(t.TouchedPages(), 5u);
}

TEST(TraceRecorderTest, EpochClosesAtItsPageBudgetAndBigRangesPassThrough) {
  TraceRecorder rec({.threads = 1, .epoch_pages = 4});
  uint64_t a = rec.Map(200 * P);
  for (uint64_t p : {13, 10, 12, 11, 20}) rec.Touch(0, a + p * P, 1, false);
  rec.Touch(0, a + 50 * P, 100 * P, true);  // >= budget: flushes page 20 first
  Trace t = rec.Finish();
  std::vector<TraceEvent> want = {
      {Op::kRead, 0, 4, 10}, {Op::kRead, 0, 1, 20}, {Op::kWrite, 0, 100, 50}};
  EXPECT_EQ(Touches(t), want);
}

// The workloads' epoch is a fixed fraction of the working set (so it keeps
// its place against the local memory at every scale), with a floor.
TEST(TraceRecorderTest, ScaledEpochIsAFractionOfTheWorkingSetWithAFloor) {
  EXPECT_EQ(ScaledEpochPages(0), kMinEpochPages);
  EXPECT_EQ(ScaledEpochPages(258), kMinEpochPages);  // Kmeans, 1/2048
  EXPECT_EQ(ScaledEpochPages(4096), 64u);            // Kmeans, 1/128; kmeans-32g, 1/2048
  EXPECT_EQ(ScaledEpochPages(524288), 8192u);        // Kmeans at the paper's 2 GB
  // Above the floor it scales with the working set: 4x the scale, 4x the epoch.
  EXPECT_EQ(ScaledEpochPages(4 * 65536), 4 * ScaledEpochPages(65536));
  // At most a quarter of a 25% local memory from 256 working-set pages up:
  // below that the major faults per page depend on the epoch.
  for (uint64_t ws = 256; ws <= (uint64_t{1} << 24); ws *= 2) {
    EXPECT_LE(4 * ScaledEpochPages(ws), ws / 4) << ws;
  }
  EXPECT_EQ(ScaledEpochPages(~uint64_t{0}), uint32_t{1} << 31);  // no wrap
}

// RecordWorkload records with the scaled epoch, not RecorderOptions' default.
TEST(TraceRecorderTest, WorkloadsRecordWithTheScaledEpoch) {
  const double scale = 1.0 / 8192;
  const uint64_t bytes =
      static_cast<uint64_t>(static_cast<double>(PaperWorkingSetBytes("kmeans")) * scale);
  const KmeansParams p = KmeansParams::ForWorkingSet(bytes, 1);
  const Trace t = RecordWorkload("kmeans", scale, 1);
  EXPECT_EQ(t, RunKmeans(p, {.epoch_pages = ScaledEpochPages(bytes / kPageBytes)}).trace);
  EXPECT_NE(t, RunKmeans(p, {.epoch_pages = 512}).trace);
}

TEST(TraceRecorderTest, ThreadsKeepSeparateEpochsAndBarriersFlushAll) {
  TraceRecorder rec({.threads = 2, .epoch_pages = 64});
  uint64_t a = rec.Map(8 * P);
  rec.Touch(1, a + 4 * P, 1, true);
  rec.Touch(0, a, 1, false);
  rec.Barrier();
  rec.Touch(0, a + P, 1, false);
  Trace t = rec.Finish();
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[1], (TraceEvent{Op::kRead, 0, 1, 0}));
  EXPECT_EQ(t.events[2], (TraceEvent{Op::kWrite, 1, 1, 4}));
  EXPECT_EQ(t.events[3].op, Op::kBarrier);
  EXPECT_EQ(t.events[4], (TraceEvent{Op::kRead, 0, 1, 1}));
}

TEST(TraceRecorderTest, TracedArrayMapsFreshRegionsAndUnmapsOnDestruction) {
  TraceRecorder rec;
  {
    TracedArray<double> x(rec, 1024);  // 2 pages
    x.Set(600, 1.5);
    EXPECT_EQ(x.Get(600), 1.5);
  }
  TracedArray<int32_t> y(rec, 10);
  Trace t = rec.Finish();
  ASSERT_GE(t.events.size(), 4u);
  EXPECT_EQ(t.events[0], (TraceEvent{Op::kMap, 0, 2, 0}));
  EXPECT_EQ(t.events[1], (TraceEvent{Op::kWrite, 0, 1, 1}));
  EXPECT_EQ(t.events[2], (TraceEvent{Op::kUnmap, 0, 2, 0}));
  EXPECT_EQ(t.events[3], (TraceEvent{Op::kMap, 0, 1, 2}));  // never reuses pages
}

Trace Sample() {
  Trace t;
  t.threads = 3;
  t.address_pages = 1 << 20;
  t.events = {{Op::kMap, 0, 1 << 20, 0}, {Op::kRead, 2, 7, 900000}, {Op::kWrite, 1, 1, 3},
              {Op::kBarrier, 0, 0, 0},   {Op::kRead, 0, 5, 5},      {Op::kUnmap, 0, 1 << 20, 0}};
  return t;
}

TEST(TraceFormatTest, RoundTripsAndRejectsDamage) {
  Trace t = Sample();
  std::string s = t.Serialize();
  Trace back;
  ASSERT_TRUE(Trace::Parse(s, &back));
  EXPECT_EQ(back, t);
  EXPECT_LT(s.size(), 8 + 6 * 6 + 10u);  // a few bytes per event
  EXPECT_FALSE(Trace::Parse(s.substr(0, s.size() - 1), &back));
  EXPECT_FALSE(Trace::Parse("X" + s.substr(1), &back));
}

TEST(TraceCacheTest, RecordsOnceThenReusesPerKey) {
  auto dir =
      std::filesystem::temp_directory_path() / ("dmb_trace_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TraceCache cache(dir);
  int recorded = 0;
  auto record = [&] {
    ++recorded;
    return Sample();
  };
  TraceKey k{"kmeans", 0.25, 7, "v1"};
  bool hit = true;
  EXPECT_EQ(cache.GetOrRecord(k, record, &hit), Sample());
  EXPECT_FALSE(hit);
  EXPECT_EQ(cache.GetOrRecord(k, record, &hit), Sample());
  EXPECT_TRUE(hit);
  EXPECT_EQ(recorded, 1);
  TraceCache again(dir);  // a later run
  again.GetOrRecord(k, record, &hit);
  EXPECT_TRUE(hit);
  for (TraceKey other : {TraceKey{"kmeans", 0.25, 8, "v1"}, TraceKey{"kmeans", 0.5, 7, "v1"},
                         TraceKey{"kmeans", 0.25, 7, "v2"}, TraceKey{"pagerank", 0.25, 7, "v1"}}) {
    cache.GetOrRecord(other, record, &hit);
    EXPECT_FALSE(hit) << other.KeyLine();
  }
  EXPECT_EQ(recorded, 5);
  std::ofstream(cache.PathOf(k), std::ios::trunc) << k.KeyLine() << "garbage";
  cache.GetOrRecord(k, record, &hit);
  EXPECT_FALSE(hit);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dmb::apps::swap

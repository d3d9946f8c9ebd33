// RunSwap end to end: every approach pages a small Kmeans through remote
// memory with every swapped-in page's stamp intact, and the metrics mean
// what the header says.
#include "apps/swap/swap_run.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "apps/swap/pager.h"
#include "apps/swap/swap_space.h"
#include "systems/knobs.h"

namespace dmb::apps::swap {
namespace {

struct Case {
  std::string system;
  std::map<std::string, std::string> knobs;
};

// ctest's and GoogleTest's name for a case: "onesided_mw granularity=1MB"
// (not the bytes of the struct).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.system;
  for (const auto& [k, v] : c.knobs) *os << " " << k << "=" << v;
}

harness::TestbedSpec Bed(const Case& c, int cns) {
  harness::TestbedSpec t;
  t.system = c.system;
  t.knobs = c.knobs;
  t.cns = cns;
  t.cn_cores = 8;
  t.pool_bytes = 64ull << 20;
  return t;
}

SwapRunSpec Small(int tasks) {
  SwapRunSpec s;
  s.workload = "kmeans";
  s.scale = 1.0 / 2048;  // 1 MB working set, 16 MB swap area per CN
  s.tasks = tasks;
  s.local_ratio = 0.5;
  return s;
}

class EveryApproach : public ::testing::TestWithParam<Case> {};

TEST_P(EveryApproach, PagesThroughRemoteMemoryWithNoCorruption) {
  harness::Testbed tb(Bed(GetParam(), 2));
  const SwapRunResult r = RunSwap(tb, Small(4));
  EXPECT_EQ(r.stamp_mismatches, 0u) << r.first_mismatch;
  EXPECT_EQ(r.failures, 0u) << r.first_failure;
  EXPECT_GT(r.major_faults, 0u);
  EXPECT_GT(r.writes, 0u);
  EXPECT_GE(r.reads, r.major_faults);  // sync READs plus readahead
  EXPECT_GT(r.allocs, 0u);
  EXPECT_GT(r.mem_util, 0.0);
  EXPECT_LE(r.mem_util, 1.0);
  EXPECT_GT(r.job_s_mean, 0.0);
  EXPECT_GT(r.sync_lat.count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Swap, EveryApproach,
    ::testing::Values(Case{"static_mr", {{"granularity", "16MB"}}},
                      Case{"fine_mr", {{"granularity", "1MB"}}},
                      Case{"rpc_mw", {{"mw_type", "1"}, {"granularity", "1MB"}}},
                      Case{"rpc_mw", {{"mw_type", "2"}, {"granularity", "1MB"}}},
                      Case{"onesided_mw", {{"granularity", "1MB"}}},
                      Case{"onesided_mw",
                           {{"granularity", "1MB"}, {"sep", "false"}, {"group_size", "2"}}},
                      Case{"odrp", {}}, Case{"finemem", {{"granularity", "64KB"}}}),
    [](const auto& info) {
      std::string n = info.param.system;
      for (const auto& [k, v] : info.param.knobs) n += "_" + k + v;
      for (char& ch : n) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

TEST(SwapRunTest, AllLocalMemoryNeverSwaps) {
  harness::Testbed tb(Bed({"onesided_mw", {{"granularity", "1MB"}}}, 1));
  SwapRunSpec s = Small(1);
  s.local_ratio = 1.0;
  const SwapRunResult r = RunSwap(tb, s);
  EXPECT_EQ(r.major_faults, 0u);
  EXPECT_EQ(r.writes, 0u);
  EXPECT_EQ(r.allocs, 0u);
}

TEST(SwapRunTest, LessLocalMemorySwapsMoreAndTakesLonger) {
  double job_s[2];
  uint64_t faults[2];
  for (int i = 0; i < 2; ++i) {
    harness::Testbed tb(Bed({"static_mr", {{"granularity", "16MB"}}}, 1));
    SwapRunSpec s = Small(1);
    s.local_ratio = i == 0 ? 0.5 : 0.25;
    const SwapRunResult r = RunSwap(tb, s);
    job_s[i] = r.job_s_mean;
    faults[i] = r.major_faults;
  }
  EXPECT_GT(faults[1], faults[0]);
  EXPECT_GT(job_s[1], job_s[0]);
}

TEST(SwapRunTest, CoarseSegmentsWasteMemoryFineOnesDoNot) {
  harness::Testbed coarse(Bed({"static_mr", {{"granularity", "16MB"}}}, 1));
  harness::Testbed fine(Bed({"odrp", {}}, 1));
  const SwapRunResult c = RunSwap(coarse, Small(2));
  const SwapRunResult f = RunSwap(fine, Small(2));
  EXPECT_LT(c.mem_util, 0.5);   // 16 MB mapped for about 1 MB of copies
  EXPECT_GT(f.mem_util, 0.95);  // a 4 KB chunk per copy (less the frees in flight)
}

TEST(SwapRunTest, WholeAreaMapsEverySegmentUpFront) {
  harness::Testbed tb(Bed({"static_mr", {{"granularity", "4MB"}}}, 1));
  SwapRunSpec s = Small(1);
  s.segment_policy = "whole";
  const SwapRunResult r = RunSwap(tb, s);
  EXPECT_EQ(r.peak_mapped_bytes, 16ull << 20);
  EXPECT_EQ(r.frees, 0u);
}

// A small swap area (8 tasks of 258 pages, 25% local, 2,048 slots per CN):
// the slot caches give batches back while tasks wait on faults, and the
// reclaim core hands the slots out again meanwhile. Their old copies must be
// released before the new ones are queued (they were released only after
// the fault: "slot 917 already holds a copy").
TEST(SwapRunTest, ASlotGivenBackWhileATaskFaultsCanBeReusedAtOnce) {
  harness::TestbedSpec bed = Bed({"static_mr", {{"granularity", "1MB"}}}, 2);
  bed.cn_cores = 24;
  harness::Testbed tb(bed);
  SwapRunSpec s = Small(8);
  s.local_ratio = 0.25;
  s.swap_gb = 8;
  const SwapRunResult r = RunSwap(tb, s);
  EXPECT_EQ(r.stamp_mismatches, 0u) << r.first_mismatch;
  EXPECT_EQ(r.failures, 0u) << r.first_failure;
  EXPECT_GT(r.major_faults, 0u);
}

TEST(SwapRunTest, BadSpecsAreNamed) {
  harness::Testbed tb(Bed({"static_mr", {{"granularity", "16MB"}}}, 1));
  SwapRunSpec s = Small(1);
  s.workload = "quicksort";
  EXPECT_THROW(
      {
        try {
          RunSwap(tb, s);
        } catch (const systems::ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("known: kmeans"), std::string::npos) << e.what();
          throw;
        }
      },
      systems::ConfigError);
  s = Small(64);  // 64 tasks of 0.5 MB over memory.high do not fit a 16 MB area
  EXPECT_THROW(RunSwap(tb, s), systems::ConfigError);
  s = Small(1);
  s.local_ratio = 0;
  EXPECT_THROW(RunSwap(tb, s), systems::ConfigError);
}

// One CN's pager on Static-MR (1 MB chunks) over a 1,024-slot area, two
// paging cores.
harness::TestbedSpec PagerBed() {
  harness::TestbedSpec t;
  t.system = "static_mr";
  t.knobs = {{"granularity", "1MB"}};
  t.pool_bytes = 16ull << 20;
  return t;
}

class PagerTest : public ::testing::Test {
 protected:
  void ExpectTwoReadsTwoWritesClean() const {
    EXPECT_EQ(pager.stats().stamp_mismatches, 0u) << pager.stats().first_mismatch;
    EXPECT_EQ(pager.stats().failures, 0u) << pager.stats().first_failure;
    EXPECT_EQ(pager.stats().reads, 2u);
    EXPECT_EQ(pager.stats().writes, 2u);
  }
  harness::Testbed tb{PagerBed()};
  SwapSpace space{{.area = {.pages = 1024, .cpus = 2}}};
  Pager pager{tb.cn(0), tb.runtime(), space.map(), {1024, 1ull << 20, SegmentPolicy::kLazy, 2}};
};

// A slot freed while its copy is being read, then handed out again and
// written before that READ lands: the old READ still finds the old copy, the
// new WRITE waits for it, and nothing is corrupted or refused.
TEST_F(PagerTest, ASlotReusedUnderAReadWaitsForIt) {
  auto body = [&]() -> Task<void> {
    EXPECT_TRUE((co_await pager.Open()).ok());
    const SwapIo old_copy{0, 7, 5}, new_copy{0, 9, 5};
    co_await pager.SwapOut(0, old_copy, pager.QueueWrite(old_copy));
    const uint64_t v = pager.Pin(5);
    tb.runtime().Spawn(pager.SwapIn(1, old_copy, IoRole::kSync, v));
    pager.Release({5});  // deferred: the READ has not landed
    const Pager::WriteTicket t2 = pager.QueueWrite(new_copy);
    EXPECT_GT(t2.version, v);
    EXPECT_EQ(t2.prev, v);
    co_await pager.SwapOut(0, new_copy, t2);
    co_await pager.SwapIn(1, new_copy, IoRole::kSync, pager.Pin(5));
    co_await pager.Quiesce();
  };
  tb.Run(body());
  ExpectTwoReadsTwoWritesClean();
  EXPECT_TRUE(pager.table().holds(5));
}

// A READ pinned on a copy whose WRITE has not run yet, the slot then freed
// and handed out again: the first WRITE must still run (the READ waits for
// it), and the second lands after both.
TEST_F(PagerTest, AWriteNeverWaitsForAReadOfItsOwnCopy) {
  auto body = [&]() -> Task<void> {
    EXPECT_TRUE((co_await pager.Open()).ok());
    const SwapIo old_copy{0, 7, 5}, new_copy{0, 9, 5};
    const Pager::WriteTicket t1 = pager.QueueWrite(old_copy);
    tb.runtime().Spawn(pager.SwapIn(1, old_copy, IoRole::kPrefetch, pager.Pin(5)));
    pager.Release({5});
    const Pager::WriteTicket t2 = pager.QueueWrite(new_copy);
    tb.runtime().Spawn(pager.SwapOut(1, new_copy, t2));
    co_await pager.SwapOut(0, old_copy, t1);
    co_await pager.SwapIn(1, new_copy, IoRole::kSync, pager.Pin(5));
  };
  tb.Run(body());
  ExpectTwoReadsTwoWritesClean();
}

// Swaps 8 pages out at once (8 WRITEs on core 0's swap-out lane), then
// reads them back as one readahead window (core 0's prefetch lane): how long
// the window takes.
Ps ReadaheadWindow(uint32_t lane_depth, PagerStats* stats) {
  harness::Testbed tb{PagerBed()};
  SwapSpace space{{.area = {.pages = 1024, .cpus = 2}}};
  Pager pager{
      tb.cn(0), tb.runtime(), space.map(), {1024, 1ull << 20, SegmentPolicy::kLazy, 2, lane_depth}};
  auto io = [](uint64_t p) { return SwapIo{0, p, 16 + p}; };
  tb.Run([](Pager& pager) -> Task<void> { EXPECT_TRUE((co_await pager.Open()).ok()); }(pager));
  std::vector<Task<void>> writes;
  for (uint64_t p = 0; p < 8; ++p)
    writes.push_back(pager.SwapOut(0, io(p), pager.QueueWrite(io(p))));
  tb.RunAll(std::move(writes));
  Ps window = 0;
  auto body = [&]() -> Task<void> {
    const Ps t0 = tb.now();
    for (uint64_t p = 0; p < 8; ++p) pager.Prefetch(0, io(p));
    co_await pager.Quiesce();
    window = tb.now() - t0;
  };
  tb.Run(body());
  *stats = pager.stats();
  return window;
}

// Fastswap posts a readahead window's READs at once on its async QP: they
// overlap on the pager's prefetch lane, where one-at-a-time lanes queue
// them. WRITEs in flight together each send a buffer of their own (a shared
// one would carry the last stamp written into it: mismatches).
TEST(PagerLanesTest, AReadaheadWindowsReadsOverlapOnTheirLane) {
  PagerStats deep, serial;
  const Ps deep_ps = ReadaheadWindow(16, &deep);
  const Ps serial_ps = ReadaheadWindow(1, &serial);
  for (const PagerStats* s : {&deep, &serial}) {
    EXPECT_EQ(s->stamp_mismatches, 0u) << s->first_mismatch;
    EXPECT_EQ(s->failures, 0u) << s->first_failure;
    EXPECT_EQ(s->reads, 8u);
    EXPECT_EQ(s->writes, 8u);
  }
  EXPECT_LT(deep_ps * 3, serial_ps) << PsToUs(deep_ps) << " us against " << PsToUs(serial_ps);
  std::cout << "8-page window: " << PsToUs(deep_ps) << " us at depth 16, " << PsToUs(serial_ps)
            << " us at depth 1\n";
}

// Depth 2. A and B hold the two buffers (until 10 and 20 us); X asks for the
// lane alone at 1 us, C for a buffer at 2 us. X must wait for both I/Os (20
// us), and C, although A's buffer is free at 10 us, for X (25 us): an
// Alloc on lane 0 is not starved by a stream of I/Os.
TEST(PagerLanesTest, AnExclusiveUserWaitsForTheLanesIoAndKeepsNewIoOut) {
  harness::Testbed tb{PagerBed()};
  fabric::Runtime& rt = tb.runtime();
  LaneSlots slots(1 << 20, 2);
  std::map<char, double> got_us;  // since the tasks started
  std::vector<uint64_t> buffers;
  Ps start = 0;  // the testbed sets up first
  auto io = [&](char who, Ps after, Ps hold) -> Task<void> {
    start = rt.now();
    co_await rt.SleepFor(after);
    const uint64_t b = co_await slots.Acquire();
    got_us[who] = PsToUs(rt.now() - start);
    buffers.push_back(b);
    co_await rt.SleepFor(hold);
    slots.Release(b);
  };
  auto exclusive = [&]() -> Task<void> {
    co_await rt.SleepFor(UsToPs(1));
    co_await slots.LockExclusive();
    got_us['X'] = PsToUs(rt.now() - start);
    EXPECT_EQ(slots.in_flight(), 0u);
    co_await rt.SleepFor(UsToPs(5));
    slots.UnlockExclusive();
  };
  std::vector<Task<void>> all;
  all.push_back(io('A', 0, UsToPs(10)));
  all.push_back(io('B', 0, UsToPs(20)));
  all.push_back(exclusive());
  all.push_back(io('C', UsToPs(2), UsToPs(1)));
  tb.RunAll(std::move(all));
  EXPECT_EQ(got_us['A'], 0);
  EXPECT_EQ(got_us['B'], 0);
  EXPECT_EQ(got_us['X'], 20);
  EXPECT_EQ(got_us['C'], 25);
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_NE(buffers[0], buffers[1]);
  for (uint64_t b : buffers) EXPECT_TRUE(b == (1 << 20) || b == (1 << 20) + kPageBytes) << b;
}

}  // namespace
}  // namespace dmb::apps::swap

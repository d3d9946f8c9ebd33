// FineMem-specific tests (the shared conformance and attack suites cover the
// MemoryManager contract): the bit layouts, the verbs one allocation and one
// free post, CAS contention on one span, the stale-rkey window, the backup
// refill RPC, and crash recovery from span headers and the redo log,
// including a crash between an allocation's span CAS and its redo CAS.
#include "systems/finemem/finemem.h"

#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "tests/suite_util.h"

namespace dmb::suite {
namespace {

using harness::Testbed;
using harness::TestbedSpec;
using systems::AccessGroup;
using systems::Chunk;
using systems::Code;
using systems::FineMemCn;
using systems::FineMemMn;
using systems::Status;
using systems::finemem::Bitmap;
using systems::finemem::CommitOp;
using systems::finemem::Contention;
using systems::finemem::FindRun;
using systems::finemem::HintOf;
using systems::finemem::kRedoAlloc;
using systems::finemem::kRedoFree;
using systems::finemem::kSpanContended;
using systems::finemem::kSpanFull;
using systems::finemem::LastOpWasAlloc;
using systems::finemem::LogOf;
using systems::finemem::MakeRedo;
using systems::finemem::MakeSpanHeader;
using systems::finemem::NextContention;
using systems::finemem::RedoForLog;
using systems::finemem::StateOf;
using systems::finemem::TempLog;
using systems::finemem::WithHint;

TestbedSpec Spec(const std::string& granularity, int cns, uint64_t pool_bytes,
                 int64_t regen_period_us = 100000) {
  TestbedSpec s;
  s.system = "finemem";
  s.knobs = {{"granularity", granularity}, {"regen_period_us", std::to_string(regen_period_us)}};
  s.cns = cns;
  s.pool_bytes = pool_bytes;
  return s;
}
FineMemCn& Fm(Testbed& tb, size_t cn) { return dynamic_cast<FineMemCn&>(tb.cn(cn)); }
FineMemMn& FmMn(Testbed& tb) { return dynamic_cast<FineMemMn&>(tb.mm().mn()); }
uint64_t InUse(Testbed& tb) { return tb.mm().mn().stats().chunks_in_use; }

// ---- Bit layouts -----------------------------------------------------------------

TEST(FineMemLayout, SpanHeaderFieldsRoundTrip) {
  const uint64_t h = MakeSpanHeader(0xdeadbeef, 2, TempLog{31, 5, 127, 0x3fff});
  EXPECT_EQ(Bitmap(h), 0xdeadbeefu);
  EXPECT_EQ(Contention(h), 2u);
  const TempLog l = LogOf(h);
  EXPECT_EQ(l.unit, 31u);
  EXPECT_EQ(l.size_log2, 5u);
  EXPECT_EQ(l.ts, 127u);
  EXPECT_EQ(l.user, 0x3fffu);
  EXPECT_EQ(h >> 63, 0u);
}

TEST(FineMemLayout, TimestampAdvancesOnlyWhenTheOpKindChanges) {
  const uint64_t a = CommitOp(0, 0, 0, /*alloc=*/true, 1, 0);
  EXPECT_EQ(LogOf(a).ts, 0u);
  EXPECT_TRUE(LastOpWasAlloc(a));
  const uint64_t b = CommitOp(a, 1, 0, /*alloc=*/true, 2, 0);
  EXPECT_EQ(LogOf(b).ts, 0u);  // back-to-back allocations share it
  EXPECT_EQ(Bitmap(b), 0x3u);
  const uint64_t c = CommitOp(b, 0, 0, /*alloc=*/false, 1, 0);
  EXPECT_EQ(LogOf(c).ts, 1u);
  EXPECT_FALSE(LastOpWasAlloc(c));
  EXPECT_EQ(RedoForLog(c), MakeRedo(kRedoFree, 1, 1));
  EXPECT_EQ(RedoForLog(b), MakeRedo(kRedoAlloc, 0, 2));
  const uint64_t last = MakeSpanHeader(0x1, 0, TempLog{0, 0, 127, 3});
  EXPECT_EQ(LogOf(CommitOp(last, 0, 0, /*alloc=*/false, 3, 0)).ts, 0u);  // wraps at 128
}

TEST(FineMemLayout, AlignedRunsStatesAndContentionLevels) {
  EXPECT_EQ(FindRun(0, 5), 0u);
  EXPECT_FALSE(FindRun(1, 5).has_value());
  EXPECT_EQ(FindRun(0x0000ffffu, 4), 16u);
  EXPECT_EQ(FindRun(0x6u, 1), 4u);  // units 1 and 2 used: the first free pair is 4-5
  EXPECT_EQ(StateOf(0xffffffffu), kSpanFull);
  EXPECT_EQ(StateOf(MakeSpanHeader(0x1, 2, {})), kSpanContended);
  EXPECT_EQ(NextContention(0, 0), 0u);
  EXPECT_EQ(NextContention(0, 5), 1u);
  EXPECT_EQ(NextContention(0, 10), 2u);
  EXPECT_EQ(NextContention(2, 5), 2u);  // stays contended until below the low mark
  EXPECT_EQ(NextContention(2, 2), 0u);
  EXPECT_EQ(HintOf(WithHint(~uint64_t{0}, 7, kSpanContended), 7), kSpanContended);
}

TEST(FineMemKnobs, GranularityMustBeAPowerOfTwoUpToASpan) {
  auto make = [](const std::string& g) { Testbed tb(Spec(g, 1, 16ull << 20)); };
  EXPECT_THROW(make("12288"), systems::ConfigError);
  EXPECT_THROW(make("256KB"), systems::ConfigError);
  EXPECT_NO_THROW(make("128KB"));
}

// ---- Allocation and free ------------------------------------------------------------

// Steady state: an allocation is CAS span + READ entry + CAS redo, a free is
// READ entry + CAS capability + CAS span + CAS redo (no hint change).
TEST(FineMem, SingleThreadLatencyAndVerbsPerOperation) {
  constexpr int kOps = 16;
  Testbed tb(Spec("4KB", 1, 16ull << 20));
  struct Out {
    double cold_us = 0, alloc_us = 0, free_us = 0;
    uint64_t alloc_wrs = 0, free_wrs = 0;
  } out;
  tb.Run([](Testbed& tb, Out* out) -> Task<void> {
    systems::CnSide& cn = tb.cn(0);
    AccessGroup* g = co_await cn.OpenGroup(1, 1 << 16);
    const fabric::QpCounters& wrs = g->lane(0).qp->counters();
    Ps t = tb.now();
    auto first = co_await cn.Alloc(*g);
    CO_ASSERT_OK(first.status);
    out->cold_us = PsToUs(tb.now() - t);
    std::vector<Chunk> held;
    uint64_t w = wrs.send_wrs_executed;
    t = tb.now();
    for (int i = 0; i < kOps; ++i) {
      auto r = co_await cn.Alloc(*g);
      CO_ASSERT_OK(r.status);
      held.push_back(r.value);
    }
    out->alloc_us = PsToUs(tb.now() - t) / kOps;
    out->alloc_wrs = wrs.send_wrs_executed - w;
    w = wrs.send_wrs_executed;
    t = tb.now();
    for (const Chunk& c : held) CO_ASSERT_OK(co_await cn.Free(*g, c));
    out->free_us = PsToUs(tb.now() - t) / kOps;
    out->free_wrs = wrs.send_wrs_executed - w;
  }(tb, &out));
  std::cout << "[ finemem ] single thread, 4 KB: first alloc " << out.cold_us
            << " us (cold cache), alloc " << out.alloc_us << " us, free " << out.free_us
            << " us (virtual; IPC 2 us included)\n";
  EXPECT_EQ(out.alloc_wrs, 3u * kOps);
  EXPECT_EQ(out.free_wrs, 4u * kOps);
  EXPECT_LT(out.alloc_us, out.cold_us);  // the cold one also READs hints and span headers
  EXPECT_LT(out.alloc_us, out.free_us);
  EXPECT_EQ(Fm(tb, 0).fm_stats().cas_retries, 0u);
  EXPECT_EQ(InUse(tb), 1u);
}

// 32 service threads on 4 CNs race for the 32 chunks of one span.
TEST(FineMem, ManyThreadsOnOneSpanNeverDoubleAllocate) {
  constexpr int kCns = 4, kThreads = 8;
  Testbed tb(Spec("4KB", kCns, 128 << 10));  // one span
  struct Got {
    uint32_t cn;
    AccessGroup* g;
    Chunk c;
  };
  std::vector<Got> got;
  auto thread = [](Testbed& tb, uint32_t cn_i, std::vector<Got>* got) -> Task<void> {
    systems::CnSide& cn = tb.cn(cn_i);
    AccessGroup* g = co_await cn.OpenGroup(1, 1 << 16);
    auto r = co_await cn.Alloc(*g);
    CO_ASSERT_OK(r.status);
    got->push_back({cn_i, g, r.value});
    cn.node()->memory().Fill(g->buffer_addr(), static_cast<uint8_t>(got->size()), 64);
    CO_ASSERT_OK(co_await cn.Write(g->lane(0), r.value, 0, 64, g->buffer_addr()));
  };
  std::vector<Task<void>> threads;
  for (uint32_t cn = 0; cn < kCns; ++cn) {
    for (int t = 0; t < kThreads; ++t) threads.push_back(thread(tb, cn, &got));
  }
  tb.RunAll(std::move(threads));
  ASSERT_EQ(got.size(), static_cast<size_t>(kCns * kThreads));
  std::set<uint64_t> ids;
  for (const Got& x : got) ids.insert(x.c.id);
  EXPECT_EQ(ids.size(), got.size()) << "a chunk was handed out twice";
  EXPECT_EQ(InUse(tb), got.size());
  // Every chunk still holds its own writer's tag, and the span is now full.
  tb.Run([](Testbed& tb, std::vector<Got>* got) -> Task<void> {
    for (size_t i = 0; i < got->size(); ++i) {
      const Got& x = (*got)[i];
      systems::CnSide& cn = tb.cn(x.cn);
      CO_ASSERT_OK(co_await cn.Read(x.g->lane(0), x.c, 0, 64, x.g->buffer_addr() + 4096));
      uint8_t b = 0;
      cn.node()->memory().Read(x.g->buffer_addr() + 4096, &b, 1);
      EXPECT_EQ(b, static_cast<uint8_t>(i + 1));
    }
    auto none = co_await tb.cn(0).Alloc(*(*got)[0].g);
    EXPECT_EQ(none.status.code(), Code::kOutOfMemory);
  }(tb, &got));
  uint64_t retries = 0, max = 0, retried = 0, marks = 0, helped = 0;
  for (uint32_t cn = 0; cn < kCns; ++cn) {
    const auto& s = Fm(tb, cn).fm_stats();
    retries += s.cas_retries;
    max = std::max(max, s.max_retries);
    retried += s.allocs_retried;
    marks += s.contended_marks;
    helped += s.helped_flushes;
  }
  std::cout << "[ finemem ] 32 threads, one span: CAS retries avg "
            << static_cast<double>(retries) / got.size() << " max " << max << "; " << retried << "/"
            << got.size() << " allocations retried; " << marks << " contended marks; " << helped
            << " temporary logs flushed by others\n";
  EXPECT_GT(retries, 0u);
  EXPECT_GE(max, systems::finemem::kHighRetries);
  EXPECT_GT(marks, 0u);
}

// Section hints are optimistic: a CN WRITEs the whole hint word with its own,
// possibly stale, view of the section's other spans. Here the hint says every
// span is full while one chunk is free (what such a WRITE can leave); a CN
// with no cache must still find that chunk, not report out of memory. (Found
// by figure-8's FineMem 64 KB Kmeans point: 8 free chunks hidden behind
// stale hints made an allocation fail, and the pager lost that swap-out.)
TEST(FineMem, AStaleFullHintNeverHidesAFreeChunk) {
  Testbed tb(Spec("4KB", 2, 256 << 10));  // 64 chunks: two spans of one section
  std::vector<Chunk> held;
  tb.Run([](Testbed& tb, std::vector<Chunk>* held) -> Task<void> {
    AccessGroup* g0 = co_await tb.cn(0).OpenGroup(1, 1 << 16);
    for (;;) {
      auto r = co_await tb.cn(0).Alloc(*g0);
      if (!r.ok()) break;
      held->push_back(r.value);
    }
    CO_ASSERT_OK(co_await tb.cn(0).Free(*g0, (*held)[40]));
  }(tb, &held));
  ASSERT_EQ(held.size(), 64u);
  ASSERT_EQ(InUse(tb), 63u);
  const auto& l = FmMn(tb).layout();
  uint64_t all_full = 0;
  for (uint32_t j = 0; j < systems::finemem::kSpansPerSection; ++j) {
    all_full = WithHint(all_full, j, kSpanFull);
  }
  tb.mm().mn().node()->memory().StoreU64(l.SectionAddr(0), all_full);
  tb.Run([](Testbed& tb, uint64_t freed) -> Task<void> {
    AccessGroup* g1 = co_await tb.cn(1).OpenGroup(1, 1 << 16);
    auto r = co_await tb.cn(1).Alloc(*g1);
    CO_ASSERT_OK(r.status);
    EXPECT_EQ(r.value.id, freed);
    auto none = co_await tb.cn(1).Alloc(*g1);
    EXPECT_EQ(none.status.code(), Code::kOutOfMemory) << none.status.ToString();
  }(tb, held[40].id));
  EXPECT_EQ(InUse(tb), 64u);
}

// The former owner's exact key works until the next scan, then is refused;
// the new owner's key survives the scan.
TEST(FineMem, StaleRkeyWindowClosesAtTheNextRegenerationScan) {
  for (int64_t period_us : {1000, 100000}) {
    Testbed tb(Spec("64KB", 2, 16ull << 20, period_us));
    double window_us = -1;
    tb.Run([](Testbed& tb, int64_t period_us, double* window_us) -> Task<void> {
      systems::CnSide& owner = tb.cn(0);
      systems::CnSide& next = tb.cn(1);
      AccessGroup* og = co_await owner.OpenGroup(1, 1 << 16);
      AccessGroup* ng = co_await next.OpenGroup(1, 1 << 16);
      auto a = co_await owner.Alloc(*og);
      CO_ASSERT_OK(a.status);
      CO_ASSERT_OK(co_await owner.Free(*og, a.value));
      const Ps freed = tb.now();
      auto b = co_await next.Alloc(*ng);
      CO_ASSERT_OK(b.status);
      EXPECT_EQ(b.value.addr, a.value.addr);
      EXPECT_NE(b.value.rkeys[0], a.value.rkeys[0]);
      const Ps step = period_us / 100 * kPsPerUs;
      for (;;) {
        Status st = co_await owner.Read(og->lane(0), a.value, 0, 64, og->buffer_addr());
        if (!st.ok()) {
          EXPECT_EQ(st.code(), Code::kAccessDenied) << st.ToString();
          *window_us = PsToUs(tb.now() - freed);
          break;
        }
        co_await tb.cluster().runtime().SleepFor(step);
      }
      CO_ASSERT_OK(co_await next.Read(ng->lane(0), b.value, 0, 64, ng->buffer_addr()));
    }(tb, period_us, &window_us));
    std::cout << "[ finemem ] regen_period_us=" << period_us << ": stale window " << window_us
              << " us\n";
    EXPECT_GT(window_us, 0);
    EXPECT_LE(window_us, 1.05 * period_us);
    EXPECT_GE(FmMn(tb).fm_stats().keys_regenerated, 1u);
  }
}

// Freed again before the scan: the backup is still 0, so the free asks the MN
// to rotate the stale window now. The first owner's key dies at once, the
// second's at the next scan; the third owner gets the first key's successor.
TEST(FineMem, SecondFreeBeforeRegenerationRefillsTheBackupByRpc) {
  Testbed tb(Spec("64KB", 1, 16ull << 20));
  tb.Run([](Testbed& tb) -> Task<void> {
    systems::CnSide& cn = tb.cn(0);
    AccessGroup* g = co_await cn.OpenGroup(1, 1 << 16);
    auto a = co_await cn.Alloc(*g);
    CO_ASSERT_OK(a.status);
    CO_ASSERT_OK(co_await cn.Free(*g, a.value));
    auto b = co_await cn.Alloc(*g);
    CO_ASSERT_OK(b.status);
    CO_ASSERT_TRUE(b.value.id == a.value.id);
    CO_ASSERT_OK(co_await cn.Free(*g, b.value));
    auto c = co_await cn.Alloc(*g);
    CO_ASSERT_OK(c.status);
    CO_ASSERT_TRUE(c.value.id == a.value.id);
    EXPECT_EQ(c.value.rkeys[0], systems::NextRkey(a.value.rkeys[0]));
    CO_ASSERT_OK(co_await cn.Read(g->lane(0), b.value, 0, 64, g->buffer_addr()));  // stale
    Status st = co_await cn.Read(g->lane(0), a.value, 0, 64, g->buffer_addr());
    EXPECT_EQ(st.code(), Code::kAccessDenied) << st.ToString();
    CO_ASSERT_OK(co_await cn.RecoverLane(g->lane(0)));
    CO_ASSERT_OK(co_await cn.Read(g->lane(0), c.value, 0, 64, g->buffer_addr()));
  }(tb));
  EXPECT_EQ(Fm(tb, 0).fm_stats().backup_refills, 1u);
  EXPECT_EQ(FmMn(tb).fm_stats().backups_refilled, 1u);
  EXPECT_EQ(InUse(tb), 1u);
}

TEST(FineMem, FreesAreCheckedAgainstTheRedoLogAndTheCurrentKey) {
  Testbed tb(Spec("64KB", 2, 16ull << 20));
  tb.Run([](Testbed& tb) -> Task<void> {
    AccessGroup* g0 = co_await tb.cn(0).OpenGroup(1, 1 << 16);
    AccessGroup* g1 = co_await tb.cn(1).OpenGroup(1, 1 << 16);
    auto a = co_await tb.cn(0).Alloc(*g0);
    CO_ASSERT_OK(a.status);
    EXPECT_EQ((co_await tb.cn(1).Free(*g1, a.value)).code(), Code::kNotOwner);
    CO_ASSERT_OK(co_await tb.cn(0).Free(*g0, a.value));
    EXPECT_EQ((co_await tb.cn(0).Free(*g0, a.value)).code(), Code::kNotOwner);  // double free
    auto b = co_await tb.cn(0).Alloc(*g0);
    CO_ASSERT_OK(b.status);
    CO_ASSERT_TRUE(b.value.id == a.value.id);
    EXPECT_EQ((co_await tb.cn(0).Free(*g0, a.value)).code(), Code::kInvalidArgument);  // stale
    CO_ASSERT_OK(co_await tb.cn(0).Write(g0->lane(0), b.value, 0, 64, g0->buffer_addr()));
  }(tb));
  EXPECT_EQ(InUse(tb), 1u);
}

// 128 KB chunks are whole spans; units past the last whole chunk never count.
TEST(FineMem, WholeSpanChunksAndAPoolTailThatIsNotAWholeSpan) {
  struct Case {
    const char* g;
    uint64_t pool;
    uint64_t chunks;
  };
  for (const Case& k : {Case{"128KB", (1 << 20) + (96 << 10), 8}, Case{"8KB", 200 << 10, 25}}) {
    Testbed tb(Spec(k.g, 1, k.pool));
    ASSERT_EQ(tb.mm().mn().stats().chunks_total, k.chunks) << k.g;
    std::vector<Chunk> held;
    tb.Run([](Testbed& tb, std::vector<Chunk>* held) -> Task<void> {
      systems::CnSide& cn = tb.cn(0);
      AccessGroup* g = co_await cn.OpenGroup(1, 1 << 16);
      for (;;) {
        auto r = co_await cn.Alloc(*g);
        if (!r.ok()) {
          EXPECT_EQ(r.status.code(), Code::kOutOfMemory) << r.status.ToString();
          break;
        }
        held->push_back(r.value);
      }
      EXPECT_EQ(held->size(), tb.mm().mn().stats().chunks_in_use);
      for (const Chunk& c : *held) CO_ASSERT_OK(co_await cn.Free(*g, c));
    }(tb, &held));
    EXPECT_EQ(held.size(), k.chunks) << k.g;
    std::set<uint64_t> addrs;
    for (const Chunk& c : held) addrs.insert(c.addr);
    EXPECT_EQ(addrs.size(), held.size());
    EXPECT_EQ(InUse(tb), 0u);
  }
}

// ---- Crash recovery ---------------------------------------------------------------

// CN 0 commits a third allocation on the span header and dies before its redo
// CAS. Either its temporary log is still in the header (the MN flushes it) or
// CN 1 allocated in the same span since (CN 1 flushed it before replacing it).
TEST(FineMem, CrashBetweenSpanCasAndRedoCasIsRecovered) {
  for (bool evicted : {false, true}) {
    SCOPED_TRACE(evicted ? "log evicted by another CN" : "log still in the span header");
    Testbed tb(Spec("4KB", 2, 16ull << 20));
    std::vector<Chunk> crashed;
    struct Hook {
      bool armed = false;
      uint64_t lost = ~uint64_t{0};  // the chunk committed but never logged
    } hook;
    Fm(tb, 0).set_after_commit_hook([&hook](uint64_t chunk) {
      if (!hook.armed) return false;
      hook.armed = false;
      hook.lost = chunk;
      return true;  // the service thread stops here
    });
    AccessGroup* g1 = nullptr;
    tb.Run([](Testbed& tb, bool evicted, std::vector<Chunk>* crashed, Hook* hook,
              AccessGroup** g1) -> Task<void> {
      AccessGroup* g0 = co_await tb.cn(0).OpenGroup(1, 1 << 16);
      *g1 = co_await tb.cn(1).OpenGroup(1, 1 << 16);
      for (int i = 0; i < 2; ++i) {
        auto r = co_await tb.cn(0).Alloc(*g0);
        CO_ASSERT_OK(r.status);
        crashed->push_back(r.value);
      }
      hook->armed = true;
      auto dying = co_await tb.cn(0).Alloc(*g0);
      EXPECT_FALSE(dying.ok());
      if (evicted) {
        for (int i = 0; i < 2; ++i) CO_ASSERT_OK((co_await tb.cn(1).Alloc(**g1)).status);
      }
    }(tb, evicted, &crashed, &hook, &g1));
    ASSERT_EQ(crashed.size(), 2u);
    ASSERT_NE(hook.lost, ~uint64_t{0});
    ASSERT_EQ(InUse(tb), evicted ? 5u : 3u);
    if (evicted) {
      EXPECT_GE(Fm(tb, 1).fm_stats().helped_flushes, 1u);
    }
    tb.cluster().CrashNode(tb.cn(0).node());
    systems::ReclaimReport rep;
    tb.Run([](Testbed& tb, systems::ReclaimReport* rep) -> Task<void> {
      *rep = co_await tb.mm().mn().ReclaimCn(0);
    }(tb, &rep));
    EXPECT_EQ(rep.chunks_reclaimed, 3u);
    EXPECT_EQ(InUse(tb), evicted ? 2u : 0u);
    if (!evicted) {
      EXPECT_GE(FmMn(tb).fm_stats().logs_flushed, 1u);
    }
    // The dead CN's keys are revoked, and its chunks are allocatable again.
    tb.Run([](Testbed& tb, Chunk old, AccessGroup* g) -> Task<void> {
      systems::CnSide& cn = tb.cn(1);
      Status st = co_await cn.Read(g->lane(0), old, 0, 64, g->buffer_addr());
      EXPECT_EQ(st.code(), Code::kAccessDenied) << st.ToString();
      CO_ASSERT_OK(co_await cn.RecoverLane(g->lane(0)));
      for (int i = 0; i < 3; ++i) CO_ASSERT_OK((co_await cn.Alloc(*g)).status);
    }(tb, crashed[0], g1));
    EXPECT_EQ(InUse(tb), evicted ? 5u : 3u);
  }
}

}  // namespace
}  // namespace dmb::suite

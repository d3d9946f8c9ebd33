// Attack suite: what a malicious or crashed CN can and cannot do, phrased as
// assertions per isolation level, with the counts printed.
#include <algorithm>
#include <stdexcept>

#include "tests/suite_util.h"

namespace dmb::suite {
namespace {

using harness::Testbed;
using systems::AccessGroup;
using systems::Chunk;
using systems::CnSide;
using systems::Code;
using systems::Isolation;
using systems::Result;
using systems::Status;

class Attacks : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DMB_SKIP_UNLESS_SUPPORTED(SuiteSpec(GetParam())); }
};

uint32_t IoLen(const CnSide& cn) {
  return cn.caps().fixed_io_bytes ? cn.caps().fixed_io_bytes : 64;
}

// A former owner keeps (addr, old rkey) after freeing; the chunk goes to a
// victim who writes a secret. What can the former owner still read?
struct ReuseOutcome {
  bool same_chunk = false;
  bool old_key_read_secret_at_once = false;
  double stale_window_us = -1;  // until the old key was refused
  int guesses = 0;              // enumeration: tries until the secret was read
  bool enum_reached = false;
  bool same_index = false;
};

// Reads `len` bytes of chunk `c` with a's lane 0; *got: it read the secret (0xC5).
Task<Status> ReadSecret(CnSide& a, AccessGroup* g, Chunk c, uint32_t len, bool* got) {
  a.node()->memory().Fill(g->buffer_addr(), 0, len);
  Status st = co_await a.Read(g->lane(0), c, 0, len, g->buffer_addr());
  uint8_t b = 0;
  a.node()->memory().Read(g->buffer_addr(), &b, 1);
  *got = st.ok() && b == 0xC5;
  if (g->lane(0).broken()) (void)co_await a.RecoverLane(g->lane(0));
  co_return st;
}

// The victim (CN 1) comes to hold the chunk `stolen` that the attacker freed
// and writes the secret (vg's buffer) into it; *mine: its last allocation.
// *ready only if every step succeeded.
Task<void> VictimTakesFreedChunk(Testbed& tb, AccessGroup* vg, Chunk stolen, uint32_t len,
                                 Result<Chunk>* mine, ReuseOutcome* out, bool* ready) {
  CnSide& victim = tb.cn(1);
  if (victim.caps().isolation == Isolation::kTranslated) {
    // Chunks name pages through each CN's own table, so the victim's name for
    // the reused page differs: it takes every page of the pool, writing the
    // secret into each, and then holds the attacker's old page too.
    for (;;) {
      *mine = co_await victim.Alloc(*vg);
      if (!mine->ok()) break;
      CO_ASSERT_OK(co_await victim.Write(vg->lane(0), mine->value, 0, len, vg->buffer_addr()));
    }
    EXPECT_EQ(mine->status.code(), Code::kOutOfMemory) << mine->status.ToString();
    const auto st = tb.mm().mn().stats();
    out->same_chunk = st.chunks_in_use == st.chunks_total;
    CO_ASSERT_TRUE(out->same_chunk);
  } else {
    // The victim allocates until it is handed the freed chunk (approaches that
    // park freed chunks, e.g. delayed unbinding, reuse them later).
    for (uint64_t i = 0; i <= tb.mm().mn().stats().chunks_total; ++i) {
      *mine = co_await victim.Alloc(*vg);
      CO_ASSERT_OK(mine->status);
      if (mine->value.addr == stolen.addr) break;
    }
    out->same_chunk = mine->value.addr == stolen.addr;
    CO_ASSERT_TRUE(out->same_chunk);
    CO_ASSERT_OK(co_await victim.Write(vg->lane(0), mine->value, 0, len, vg->buffer_addr()));
  }
  *ready = true;
}

// The attacker (CN 0) frees a chunk the victim then holds with its secret:
// does the old key read it at once, how long until it is refused, and does
// enumerating the key's 8 bits reach it?
Task<void> StealAfterReuse(Testbed& tb, ReuseOutcome* out) {
  CnSide& attacker = tb.cn(0);
  CnSide& victim = tb.cn(1);
  AccessGroup* ag = co_await attacker.OpenGroup(1, 1 << 16);
  AccessGroup* vg = co_await victim.OpenGroup(1, 1 << 16);
  auto old = co_await attacker.Alloc(*ag);
  CO_ASSERT_OK(old.status);
  const Chunk stolen = old.value;
  CO_ASSERT_OK(co_await attacker.Free(*ag, stolen));
  const uint32_t len = IoLen(victim);
  victim.node()->memory().Fill(vg->buffer_addr(), 0xC5, len);
  Result<Chunk> mine;
  bool ready = false;
  co_await VictimTakesFreedChunk(tb, vg, stolen, len, &mine, out, &ready);
  CO_ASSERT_TRUE(ready);
  bool got = false;
  (void)co_await ReadSecret(attacker, ag, stolen, len, &got);
  out->old_key_read_secret_at_once = got;
  // Stale window: retry the exact old key until it is refused (FineMem's
  // background regeneration), for at most 1 s of virtual time.
  const Ps t0 = tb.now();
  while (got && tb.now() - t0 < kPsPerS) {
    co_await tb.cluster().runtime().SleepFor(50 * kPsPerUs);
    (void)co_await ReadSecret(attacker, ag, stolen, len, &got);
  }
  out->stale_window_us = got ? -1 : PsToUs(tb.now() - t0);
  if (victim.caps().isolation == Isolation::kTranslated) co_return;  // no key to enumerate
  // Enumeration (OneSidedMW §2.3): same 24-bit index, every 8-bit key.
  out->same_index = (mine.value.rkeys[0] >> 8) == (stolen.rkeys[0] >> 8);
  Chunk guess = stolen;
  for (uint32_t key = 0; key < 256 && !out->enum_reached; ++key) {
    guess.rkeys.assign(1, (stolen.rkeys[0] & ~0xffu) | key);
    ++out->guesses;
    (void)co_await ReadSecret(attacker, ag, guess, len, &got);
    out->enum_reached = got;
  }
}

void PrintReuseOutcome(const std::string& param, Isolation iso, const ReuseOutcome& out) {
  const std::string window = out.stale_window_us < 0 ? std::string("never closed")
                                                     : std::to_string(out.stale_window_us) + " us";
  std::cout << "[ " << param << " ] isolation=" << systems::IsolationName(iso);
  if (iso == Isolation::kTranslated) {
    std::cout << " the victim holds every page (the attacker's old one too): "
              << (out.same_chunk ? "yes" : "no") << "; the attacker's old chunk reads its data: "
              << (out.old_key_read_secret_at_once ? "yes" : "no") << "; stale window " << window
              << "; no key to enumerate\n";
  } else {
    std::cout << " old key reads the new owner's data at once: "
              << (out.old_key_read_secret_at_once ? "yes" : "no") << "; stale window " << window
              << "; enumeration " << (out.enum_reached ? "reached" : "did not reach")
              << " the data after " << out.guesses
              << " guesses (same key index: " << (out.same_index ? "yes" : "no") << ")\n";
  }
}

void ExpectReuseOutcome(Isolation iso, const ReuseOutcome& out) {
  switch (iso) {
    case Isolation::kRegion:
      // No revocation: the documented weakness of coarse static MRs.
      EXPECT_TRUE(out.old_key_read_secret_at_once);
      EXPECT_LT(out.stale_window_us, 0);
      break;
    case Isolation::kChunkQp:
      // Type-2: refused always, including all 256 guesses.
      EXPECT_FALSE(out.old_key_read_secret_at_once);
      EXPECT_FALSE(out.enum_reached);
      EXPECT_EQ(out.guesses, 256);
      break;
    case Isolation::kChunkRkey:
      // The exact old key is refused once revocation is done...
      EXPECT_GE(out.stale_window_us, 0);
      // ...but when the new owner's key shares its index (a rebound window
      // or a reused MR slot) 256 guesses reach the new owner's data. Another
      // window at the old index may cover the chunk too: FineMem rebinds the
      // freed main window as the chunk's next backup with a new 8-bit key,
      // so the old index reaches the data with a different index than the
      // victim's (printed above; the paper's enumeration attack, [OSMW] §2.3).
      if (out.same_index) {
        EXPECT_TRUE(out.enum_reached);
        EXPECT_LE(out.guesses, 256);
      }
      break;
    case Isolation::kTranslated:
      // The free unmapped the attacker's table entry: its old chunk names
      // nothing, and the reused page is reachable only through the victim's.
      EXPECT_TRUE(out.same_chunk);
      EXPECT_FALSE(out.old_key_read_secret_at_once);
      EXPECT_EQ(out.stale_window_us, 0);
      break;
  }
}

TEST_P(Attacks, FormerOwnerOldRkeyAfterReuse) {
  auto spec = SuiteSpec(GetParam(), 2);
  if (SystemOf(GetParam()) == "finemem") spec.knobs["regen_period_us"] = "1000";
  Testbed tb(spec);
  ReuseOutcome out;
  tb.Run(StealAfterReuse(tb, &out));
  const Isolation iso = tb.mm().caps().isolation;
  PrintReuseOutcome(GetParam(), iso, out);
  ExpectReuseOutcome(iso, out);
}

TEST_P(Attacks, CannotFreeAnotherCnsChunk) {
  Testbed tb(SuiteSpec(GetParam(), 2));
  tb.Run([](Testbed& tb) -> Task<void> {
    CnSide& owner = tb.cn(0);
    CnSide& thief = tb.cn(1);
    AccessGroup* og = co_await owner.OpenGroup(1, 1 << 16);
    AccessGroup* tg = co_await thief.OpenGroup(1, 1 << 16);
    auto c = co_await owner.Alloc(*og);
    CO_ASSERT_OK(c.status);
    const uint32_t len = IoLen(owner);
    owner.node()->memory().Fill(og->buffer_addr(), 0x3B, len);
    CO_ASSERT_OK(co_await owner.Write(og->lane(0), c.value, 0, len, og->buffer_addr()));
    const uint64_t before = tb.mm().mn().stats().chunks_in_use;
    Status st = co_await thief.Free(*tg, c.value);
    EXPECT_EQ(st.code(), Code::kNotOwner) << st.ToString();
    EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, before);
    // The owner's chunk is intact and still its own.
    owner.node()->memory().Fill(og->buffer_addr(), 0, len);
    CO_ASSERT_OK(co_await owner.Read(og->lane(0), c.value, 0, len, og->buffer_addr()));
    uint8_t b = 0;
    owner.node()->memory().Read(og->buffer_addr(), &b, 1);
    EXPECT_EQ(b, 0x3B);
    CO_ASSERT_OK(co_await owner.Free(*og, c.value));
  }(tb));
}

// A CN breaks its own lane (its QP to ERR, as any refused access does) and
// recovers it, 200 times, with spare QPs where the approach has them. Each
// recovery connects a fresh MN end; the MN gives the replaced one back, so
// its memory does not grow with the rounds (it grew 16.5 KB of QP rings a
// round, and the lanes every CN shares ran out at 8,192), and an honest CN
// still opens lanes and allocates. Nor can it release the honest CN's lane.
TEST_P(Attacks, LanesRecoveredOverAndOverHoldNoMoreMnMemory) {
  auto spec = SuiteSpec(GetParam(), 2);
  if (SystemOf(GetParam()) == "rpc_mw") spec.knobs["spare_qps"] = "true";
  Testbed tb(spec);
  tb.Run([](Testbed& tb) -> Task<void> {
    CnSide& bad = tb.cn(1);
    const int lanes = std::min(2, bad.caps().max_group_lanes);
    AccessGroup* bg = co_await bad.OpenGroup(lanes, 1 << 16);
    const fabric::Memory& mn_mem = tb.mn_node()->memory();
    fabric::Runtime& rt = tb.cluster().runtime();
    constexpr Ps kSettle = 1000 * kPsPerUs;  // spares are made in the background
    uint64_t after_first = 0;
    for (int i = 0; i < 200; ++i) {
      systems::Lane& lane = bg->lane(i % lanes);
      lane.qp->Modify(fabric::QpState::kErr);
      CO_ASSERT_OK(co_await bad.RecoverLane(lane));
      CO_ASSERT_TRUE(!lane.broken());
      if (i == 1) {
        co_await rt.SleepFor(kSettle);
        after_first = mn_mem.in_use_bytes();
      }
    }
    co_await rt.SleepFor(kSettle);
    EXPECT_EQ(mn_mem.in_use_bytes(), after_first) << "the MN kept the replaced lanes";
    // The recovered lanes work, and the honest CN is not short of lanes.
    auto mine = co_await bad.Alloc(*bg);
    CO_ASSERT_OK(mine.status);
    const uint32_t len = IoLen(bad);
    CO_ASSERT_OK(co_await bad.Write(bg->lane(lanes - 1), mine.value, 0, len, bg->buffer_addr()));
    AccessGroup* hg = co_await tb.cn(0).OpenGroup(lanes, 1 << 16);
    // Releasing the honest CN's lane in its own name (what the daemon's
    // `release` carries) is refused; the lane keeps working below.
    const uint32_t honest_qpn = hg->lane(lanes - 1).mn_qpn;
    if (honest_qpn != 0) {  // the lane has an MN end
      EXPECT_THROW(tb.mm().mn().ReleaseLane(1, honest_qpn), std::invalid_argument);
    }
    auto c = co_await tb.cn(0).Alloc(*hg);
    CO_ASSERT_OK(c.status);
    CO_ASSERT_OK(co_await tb.cn(0).Write(hg->lane(lanes - 1), c.value, 0, len, hg->buffer_addr()));
    CO_ASSERT_OK(co_await tb.cn(0).Free(*hg, c.value));
    CO_ASSERT_OK(co_await bad.Free(*bg, mine.value));
  }(tb));
}

TEST_P(Attacks, CrashedCnsChunksReturnAndNobodyElses) {
  Testbed tb(SuiteSpec(GetParam(), 2));
  std::vector<Chunk> survivor_chunks;
  AccessGroup* sg = nullptr;
  tb.Run([](Testbed& tb, std::vector<Chunk>* keep, AccessGroup** sg) -> Task<void> {
    AccessGroup* cg = co_await tb.cn(0).OpenGroup(1, 1 << 16);
    *sg = co_await tb.cn(1).OpenGroup(1, 1 << 16);
    for (int i = 0; i < 5; ++i) CO_ASSERT_OK((co_await tb.cn(0).Alloc(*cg)).status);
    for (int i = 0; i < 3; ++i) {
      auto r = co_await tb.cn(1).Alloc(**sg);
      CO_ASSERT_OK(r.status);
      keep->push_back(r.value);
    }
  }(tb, &survivor_chunks, &sg));
  ASSERT_EQ(survivor_chunks.size(), 3u);
  ASSERT_EQ(tb.mm().mn().stats().chunks_in_use, 8u);
  tb.cluster().CrashNode(tb.cn(0).node());
  systems::ReclaimReport rep;
  tb.Run([](Testbed& tb, systems::ReclaimReport* rep) -> Task<void> {
    *rep = co_await tb.mm().mn().ReclaimCn(0);
  }(tb, &rep));
  std::cout << "[ " << GetParam() << " ] reclaimed " << rep.chunks_reclaimed
            << " chunks of the crashed CN\n";
  EXPECT_EQ(rep.chunks_reclaimed, 5u);
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 3u);
  tb.Run([](Testbed& tb, std::vector<Chunk> keep, AccessGroup* g) -> Task<void> {
    CnSide& cn = tb.cn(1);
    for (const Chunk& c : keep) {
      CO_ASSERT_OK(co_await cn.Write(g->lane(0), c, 0, IoLen(cn), g->buffer_addr()));
    }
    // The reclaimed memory is allocatable again.
    for (int i = 0; i < 5; ++i) CO_ASSERT_OK((co_await cn.Alloc(*g)).status);
  }(tb, survivor_chunks, sg));
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, 8u);
}

// One forged RPC: what it is, the request, the SEND's length, the answer.
struct Forged {
  const char* what;
  systems::RpcRequest req;
  uint32_t send_bytes;
  Code want;
};

std::vector<Forged> ForgedRpcs(AccessGroup* g, uint64_t held_id) {
  systems::RpcRequest alloc;
  alloc.op = systems::kRpcAlloc;
  alloc.lanes = 1;
  alloc.lane_qpns[0] = g->lane(0).mn_qpn;
  systems::RpcRequest lanes = alloc, op = alloc, free_max = alloc, free_held = alloc;
  lanes.lanes = systems::kMaxGroupLanes + 1;
  op.op = 99;
  free_max.op = free_held.op = systems::kRpcFree;
  free_max.arg[0] = ~0ull;
  free_held.arg[0] = held_id;
  const uint32_t full = sizeof(systems::RpcRequest);
  return {{"a SEND of 8 bytes", alloc, 8, Code::kInvalidArgument},
          {"17 lanes", lanes, full, Code::kInvalidArgument},
          {"op 99", op, full, Code::kInvalidArgument},
          {"a free of chunk id 2^64-1", free_max, full, Code::kNotOwner},
          {"a free of its chunk", free_held, full, Code::kOk},
          {"the same free again", free_held, full, Code::kNotOwner}};
}

// A CN writes its own RPCs (RawRpc): a SEND shorter than a request, more
// lanes than a group has, an op nobody knows, frees of an id past the table
// and of one already freed, and a SEND longer than the MN's slot. Each is
// refused by name, or (the long SEND) breaks the sender's lane only; the MN
// serves the next honest request and no chunk is lost.
Task<void> ForgeRpcs(Testbed& tb) {
  CnSide& cn = tb.cn(0);
  AccessGroup* g = co_await cn.OpenGroup(1, 1 << 16);
  auto held = co_await cn.Alloc(*g);
  CO_ASSERT_OK(held.status);
  const systems::MnStats before = tb.mm().mn().stats();
  for (const Forged& f : ForgedRpcs(g, held.value.id)) {
    auto r = co_await RawRpc(cn.node(), g->lane(0), f.req, f.send_bytes);
    CO_ASSERT_OK(r.status);
    EXPECT_EQ(static_cast<Code>(r.value.code), f.want) << f.what;
  }
  EXPECT_EQ(tb.mm().mn().stats().rpcs_rejected, before.rpcs_rejected + 5);
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, before.chunks_in_use - 1);
  systems::RpcRequest longer;
  longer.op = systems::kRpcAlloc;
  auto r = co_await RawRpc(cn.node(), g->lane(0), longer, 2 * systems::kRpcSlotBytes - 8);
  EXPECT_EQ(r.status.code(), Code::kLaneBroken) << "a SEND longer than the MN's slot";
  CO_ASSERT_OK(co_await cn.RecoverLane(g->lane(0)));
  auto again = co_await cn.Alloc(*g);
  CO_ASSERT_OK(again.status);
  CO_ASSERT_OK(co_await cn.Free(*g, again.value));
  EXPECT_EQ(tb.mm().mn().stats().chunks_in_use, before.chunks_in_use - 1);
}

// Where the MN CPU serves allocations (RPCs on lane 0), that is.
TEST_P(Attacks, ForgedRpcsAreRefusedAndLoseNothing) {
  Testbed tb(SuiteSpec(GetParam(), 1));
  if (!tb.mm().caps().mn_cpu_on_alloc) {
    GTEST_SKIP() << "allocation here is not an RPC served by the MN CPU";
  }
  tb.Run(ForgeRpcs(tb));
}

INSTANTIATE_TEST_SUITE_P(AllSystems, Attacks, ::testing::ValuesIn(AllSystems()),
                         [](const auto& info) { return CaseName(info.param); });

}  // namespace
}  // namespace dmb::suite

// The worked example of the README's "Adding an approach touches three
// files": a whole approach, one_mr, written here as it would be in the tree,
// then held to the same contract as every other: linked into the suites'
// binary (systems_suite_test), the conformance suite (conformance_test.cc)
// and the attack suite (attack_test.cc) run it, as AllSystems/*/one_mr.
//
// one_mr: the MN registers ONE MR over its whole pool at start and hands out
// chunks of it by RPC (the CN side is the common RpcCn); freeing returns the
// chunk to the table and revokes nothing. Static-MR with a single region:
// isolation at region (here, pool) granularity only, which the attack suite
// reports as such (a former owner's key reads the next owner's data).
//
// For a real approach the three pieces below go to three files; a test
// cannot edit the last two, so here they are a CMake line for this test and
// a Registry::Add call.
#include <algorithm>

#include "systems/common/chunk_rpc_mn.h"
#include "systems/common/cn_base.h"
#include "systems/registry.h"
#include "tests/suite_util.h"

// ---- 1. systems/one_mr/one_mr.cc: the approach and its SystemInfo ----

namespace dmb::systems {
namespace {

constexpr uint32_t kOneMrAccess =
    fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic;

// MN side: ChunkRpcMn lays the pool out in chunks of `granularity` and
// serves the allocation RPCs; an approach says how a chunk is made
// reachable (Grant) and unreachable again (Revoke).
class OneMrMn : public ChunkRpcMn {
 public:
  using ChunkRpcMn::ChunkRpcMn;

 protected:
  Task<void> SetupChunks() override {
    mr_ = co_await node_->RegMr(pd_, table_.addr(0), table_.count() * table_.chunk_bytes(),
                                kOneMrAccess);
  }
  Task<uint32_t> Grant(uint64_t) override { co_return mr_->rkey(); }
  Task<void> Revoke(uint64_t i) override {
    table_.Release(i);  // the MR stays: nothing is revoked
    co_return;
  }

 private:
  fabric::Mr* mr_ = nullptr;
};

// CN side: what the CN may assume of its chunks (the suites check each).
Capabilities OneMrCaps(const Knobs& k) {
  Capabilities c;
  c.granularity_bytes = k.Size("granularity");
  c.isolation = Isolation::kRegion;
  c.mn_cpu_on_alloc = true;
  return c;
}

class OneMrCn : public RpcCn {
 public:
  OneMrCn(const Deployment& d, uint32_t cn, MnControl* mn, const Knobs& k)
      : RpcCn(d, cn, mn, OneMrCaps(k)) {}
};

}  // namespace

extern const SystemInfo kOneMr;
const SystemInfo kOneMr{
    "one_mr",
    "one MR over the whole pool, chunks of it handed out by RPC (the README's worked example)",
    {{"granularity", KnobKind::kSize, "1MB", "size of each chunk handed out", 4096}},
    [](const Deployment& d, const Knobs& k) -> std::unique_ptr<MemoryManager> {
      return std::make_unique<BasicManager<OneMrMn, OneMrCn>>("one_mr", d, k);
    },
    {},                          // suite_variants: none besides the defaults
    {{"granularity", "64KB"}}};  // suite_knobs: small chunks, fast suites

}  // namespace dmb::systems

// ---- 2. systems/CMakeLists.txt: one_mr/one_mr.cc in dmb_systems ----
// Here: tests/CMakeLists.txt lists this file in systems_suite_test's SOURCES.

// ---- 3. systems/registry.cc: `extern const SystemInfo kOneMr;` and
// `&kOneMr` in kAll ----
// Here: added at static initialization, before GoogleTest asks the registry
// for the suites' parameters (AllSystems() in tests/suite_util.h).
namespace {
const bool kOneMrRegistered = (dmb::systems::Registry::Add(&dmb::systems::kOneMr), true);
}  // namespace

// ---- What the suites then do with it ----

namespace dmb::suite {
namespace {

TEST(WorkedExample, TheSuitesRunTheNewApproach) {
  ASSERT_TRUE(kOneMrRegistered);
  const std::vector<std::string> all = AllSystems();
  EXPECT_NE(std::find(all.begin(), all.end(), "one_mr"), all.end());
  // Only this process knows it: suites that spawn a `dmbench mn` daemon skip it.
  EXPECT_FALSE(systems::Registry::BuiltIn("one_mr"));
  EXPECT_TRUE(systems::Registry::BuiltIn("static_mr"));
  // Its knobs are checked as every approach's are.
  harness::TestbedSpec typo = SuiteSpec("one_mr");
  typo.knobs["granularty"] = "1MB";
  EXPECT_THROW(harness::Testbed tb(typo), systems::ConfigError);
}

TEST(WorkedExample, AllocatesWritesAndReadsBack) {
  harness::Testbed tb(SuiteSpec("one_mr", 1));
  tb.Run([](harness::Testbed& tb) -> Task<void> {
    systems::CnSide& cn = tb.cn(0);
    systems::AccessGroup* g = co_await cn.OpenGroup(1, 1 << 16);
    auto r = co_await cn.Alloc(*g);
    CO_ASSERT_OK(r.status);
    EXPECT_EQ(r.value.bytes, 64u << 10);  // suite_knobs' granularity
    auto& mem = cn.node()->memory();
    mem.Fill(g->buffer_addr(), 0x5a, 64);
    CO_ASSERT_OK(co_await cn.Write(g->lane(0), r.value, 128, 64, g->buffer_addr()));
    mem.Fill(g->buffer_addr() + 64, 0, 64);
    CO_ASSERT_OK(co_await cn.Read(g->lane(0), r.value, 128, 64, g->buffer_addr() + 64));
    uint8_t back[64];
    mem.Read(g->buffer_addr() + 64, back, sizeof back);
    for (uint8_t b : back) EXPECT_EQ(b, 0x5a);
    CO_ASSERT_OK(co_await cn.Free(*g, r.value));
  }(tb));
}

}  // namespace
}  // namespace dmb::suite

// OneSidedMW's allocation WR chain on the simulated RNIC: a CN's SEND makes
// the MN's RNIC claim a free-MW queue element, bind the entry's MW group to
// the requested QPs and write the group back, with the MN CPU idle.
#include "systems/onesided_mw/alloc_chain.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fabric/sim/test_util.h"

namespace dmb::sim::testing {
namespace {

using systems::Code;
using systems::Result;
using namespace systems::onesided_mw;

constexpr uint64_t kChunk = 4096;
constexpr Ps kTimeout = 1000 * kPsPerUs;

// One CN: its alloc client, its Free QP, G-1 access QPs, and one more access
// QP it never names (each a CN QP connected to an MN QP of the data PD).
struct Cn {
  uint32_t index = 0;
  Node* node = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  uint64_t buf = 0;
  Mr* mr = nullptr;
  std::unique_ptr<AllocClient> client;
  Qp *free_cn = nullptr, *free_mn = nullptr;
  std::vector<Qp*> acc_cn, acc_mn;
  Qp *other_cn = nullptr, *other_mn = nullptr;
  std::unique_ptr<AllocChain> chain;

  std::vector<uint32_t> AccessQpns() const {
    std::vector<uint32_t> q;
    for (Qp* m : acc_mn) q.push_back(m->qp_num());
    return q;
  }
  // Where each MW of a group must be bound: MW 0 the Free QP, MW k access QP k.
  std::vector<uint32_t> WantQpns() const {
    std::vector<uint32_t> q = {free_mn->qp_num()};
    for (Qp* m : acc_mn) q.push_back(m->qp_num());
    return q;
  }
  uint32_t lkey() const { return mr->lkey(); }
};

class AllocChainTest : public SimFixture {
 protected:
  void Build(uint32_t entries, int cns = 1, uint32_t g = 3, uint32_t instances = 8) {
    g_ = g;
    mn_ = AddNode("mn");
    data_pd_ = mn_->AllocPd();
    mn_cq_ = mn_->CreateCq(1024);
    const uint64_t pool = mn_->memory().Alloc(entries * kChunk, 4096);
    // The pool MR grants no remote access itself: only bound windows do.
    pool_mr_ = RegMr(mn_, data_pd_, pool, entries * kChunk, kLocalWrite | kMwBind);
    cluster_->RunToCompletion([](Node* mn, Pd* pd, Mr* pool, MetadataConfig c,
                                 std::unique_ptr<Metadata>* out) -> Task<void> {
      *out = co_await Metadata::Create(mn, pd, pool, c);
    }(mn_, data_pd_, pool_mr_, MetadataConfig{g, entries, kChunk}, &md_));
    for (int i = 0; i < cns; ++i) AddCn(static_cast<uint32_t>(i), instances);
  }

  std::pair<Qp*, Qp*> Lane(Cn& cn) {
    Qp* c = MakeQp(cn.node, cn.pd, cn.cq);
    Qp* m = MakeQp(mn_, data_pd_, mn_cq_);
    cluster_->Connect(c, m);
    return {c, m};
  }

  void AddCn(uint32_t index, uint32_t instances) {
    auto cn = std::make_unique<Cn>();
    cn->index = index;
    cn->node = AddNode("cn" + std::to_string(index));
    cn->pd = cn->node->AllocPd();
    cn->cq = cn->node->CreateCq(64);
    cn->buf = cn->node->memory().Alloc(1 << 16);
    cn->mr = RegMr(cn->node, cn->pd, cn->buf, 1 << 16);
    cn->client = std::make_unique<AllocClient>(cn->node, cn->pd, &rt(), cn->mr, cn->buf + 0x8000,
                                               g_, recycle_ ? instances : 0);
    std::tie(cn->free_cn, cn->free_mn) = Lane(*cn);
    for (uint32_t k = 1; k < g_; ++k) {
      auto [c, m] = Lane(*cn);
      cn->acc_cn.push_back(c);
      cn->acc_mn.push_back(m);
    }
    std::tie(cn->other_cn, cn->other_mn) = Lane(*cn);
    AllocChainConfig cc;
    cc.free_qpn = cn->free_mn->qp_num();
    cc.owner_id = OwnerIdOfCn(index);
    cc.max_instances = instances;
    cc.recycle = recycle_;
    cluster_->RunToCompletion([](SimCluster* cl, Metadata* md, AllocChainConfig cc,
                                 std::unique_ptr<AllocChain>* out) -> Task<void> {
      *out = co_await AllocChain::Create(cl, md, cc);
    }(cluster_.get(), md_.get(), cc, &cn->chain));
    cluster_->Connect(cn->client->qp(), cn->chain->alloc_qp());
    cluster_->RunToCompletion(cn->chain->Arm(instances));
    cns_.push_back(std::move(cn));
  }

  static Task<void> AllocInto(AllocClient* c, std::vector<uint32_t> qpns, Result<AllocGrant>* out) {
    *out = co_await c->Allocate(std::move(qpns), kTimeout);
  }
  Result<AllocGrant> Alloc(Cn& cn) {
    Result<AllocGrant> r;
    cluster_->RunToCompletion(AllocInto(cn.client.get(), cn.AccessQpns(), &r));
    return r;
  }

  SimMw* Window(uint32_t entry, uint32_t k) { return static_cast<SimMw*>(md_->mw(entry, k)); }

  // The entry's windows are bound to `cn`'s QPs, over the entry's chunk, with
  // the keys `grant` reports.
  void ExpectBoundTo(uint32_t entry, const Cn& cn, const AllocGrant& grant) {
    const std::vector<uint32_t> want = cn.WantQpns();
    ASSERT_EQ(grant.rkeys.size(), g_);
    for (uint32_t k = 0; k < g_; ++k) {
      SimMw* mw = Window(entry, k);
      EXPECT_EQ(mw->state_, SimMw::State::kValid) << "entry " << entry << " MW " << k;
      EXPECT_EQ(mw->qpn_, want[k]) << "entry " << entry << " MW " << k;
      EXPECT_EQ(mw->addr_, md_->chunk_addr(entry)) << "MW " << k;
      EXPECT_EQ(mw->length_, kChunk) << "MW " << k;
      EXPECT_EQ(grant.rkeys[k], mw->rkey()) << "MW " << k;
    }
  }

  // Data through `grant`'s windows: a WRITE via access QP 1 that a READ via
  // access QP 2 returns, and a READ via a QP the CN did not name, refused.
  void ExpectDataThroughWindows(Cn& cn, const AllocGrant& grant) {
    cn.node->memory().StoreU64(cn.buf, 0x5eed);
    WorkCompletion wc =
        Exec(cn.acc_cn[0], cn.cq, Write(cn.buf, cn.lkey(), 8, grant.base + 64, grant.rkeys[1]));
    ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
    wc =
        Exec(cn.acc_cn[1], cn.cq, Read(cn.buf + 64, cn.lkey(), 8, grant.base + 64, grant.rkeys[2]));
    ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
    EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 64), 0x5eedu);
    wc = Exec(cn.other_cn, cn.cq, Read(cn.buf + 128, cn.lkey(), 8, grant.base, grant.rkeys[1]));
    EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << "a QP the CN did not name";
  }

  // The MN unbinds entry's windows as a free would (LOCAL_INV of each key
  // `grant` holds, from an MN QP that may invalidate any QP's windows).
  void UnbindAsAFree(uint32_t entry, const AllocGrant& grant) {
    Cq* inv_cq = mn_->CreateCq(16);
    QpInitAttr ia;
    ia.pd = data_pd_;
    ia.send_cq = inv_cq;
    ia.recv_cq = inv_cq;
    ia.invalidate_any_qp = true;
    Qp* inv = mn_->CreateQp(ia);
    cluster_->Connect(inv, inv);
    for (uint32_t k = 0; k < g_; ++k) {
      SendWr li;
      li.opcode = Opcode::kLocalInv;
      li.invalidate_rkey = grant.rkeys[k];
      ASSERT_EQ(Exec(inv, inv_cq, li).status, WcStatus::kSuccess) << "MW " << k;
      ASSERT_EQ(Window(entry, k)->state_, SimMw::State::kFree);
    }
  }

  uint32_t g_ = 3;
  bool recycle_ = false;  // chains re-armed by the CN's requests (AllocChainConfig::recycle)
  Node* mn_ = nullptr;
  Pd* data_pd_ = nullptr;
  Cq* mn_cq_ = nullptr;
  Mr* pool_mr_ = nullptr;
  std::unique_ptr<Metadata> md_;
  std::vector<std::unique_ptr<Cn>> cns_;
};

TEST(OnesidedMwLayout, OffsetsAndTheMaskedHeadAdvance) {
  const Layout l = Layout::Make(3, 5);
  EXPECT_EQ(l.ring_slots, 8u);
  EXPECT_EQ(l.ring_bytes, 64u);
  EXPECT_EQ(l.entry_stride, 128u) << "16 + 3 x 16 + 8 + 8 = 80, rounded up to 64";
  EXPECT_EQ(l.owner_off_in_entry(), 64u);
  EXPECT_EQ(l.HeadBoundaryMask(), (1ull << 5) | (1ull << 63));
  const uint64_t ring = 0x10000;
  EXPECT_EQ(l.Advance(ring + 56, 1, ring), ring) << "the last element wraps to the first";
  EntryImage e{0x1234, 0x5678, 0x9000, {0x100, 0x200, 0x300}, {0x101, 0x201, 0x301}, 7};
  std::vector<uint8_t> b(l.entry_stride);
  EncodeEntry(l, e, b.data());
  EXPECT_EQ(fabric::LoadBe64(b.data() + 16 + 16), 0x9000u) << "MW 1's record starts with base";
  EXPECT_EQ(fabric::LoadBe32(b.data() + 16 + 16 + 8), 0x200u);
  const EntryImage d = DecodeEntry(l, b.data());
  EXPECT_EQ(d.handle, 0x5678u);
  EXPECT_EQ(d.next_rkeys, e.next_rkeys);
  EXPECT_EQ(d.owner_id, 7u);
}

TEST_F(AllocChainTest, OneAllocationBindsTheGroupToTheRequestedQpsOnly) {
  Build(4);
  Cn& cn = *cns_[0];
  const Result<AllocGrant> r = Alloc(cn);
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  const AllocGrant& a = r.value;
  EXPECT_EQ(a.seq, 0u);
  EXPECT_EQ(a.handle, md_->entry_addr(0)) << "the head's first element names entry 0";
  EXPECT_EQ(a.base, md_->chunk_addr(0));
  ExpectBoundTo(0, cn, a);
  for (uint32_t k = 0; k < g_; ++k) {
    EXPECT_EQ(Window(1, k)->state_, SimMw::State::kFree) << "entry 1 untouched, MW " << k;
  }

  // The queue and the table, as the chain left them.
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + kElementBytes);
  EXPECT_EQ(md_->LoadElement(0), 0u) << "the claimed element is zeroed";
  EXPECT_EQ(md_->LoadElement(1), md_->entry_addr(1));
  EXPECT_EQ(md_->LoadEntry(0).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(md_->LoadEntry(1).owner_id, kNoOwner);
  EXPECT_FALSE(cn.chain->Faulted());

  // Data through the windows: WRITE through access QP 1, READ back through
  // access QP 2 and through the Free QP (MW 0).
  const uint64_t pattern = 0x0123456789abcdefull;
  cn.node->memory().StoreU64(cn.buf, pattern);
  WorkCompletion wc =
      Exec(cn.acc_cn[0], cn.cq, Write(cn.buf, cn.lkey(), 8, a.base + 256, a.rkeys[1]));
  ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
  EXPECT_EQ(mn_->memory().LoadU64(a.base + 256), pattern);
  wc = Exec(cn.acc_cn[1], cn.cq, Read(cn.buf + 64, cn.lkey(), 8, a.base + 256, a.rkeys[2]));
  ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
  EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 64), pattern);
  wc = Exec(cn.free_cn, cn.cq, Read(cn.buf + 128, cn.lkey(), 8, a.base + 256, a.rkeys[0]));
  ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
  EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 128), pattern);

  // Refused: a QP of the CN it did not name, another access QP's window, and
  // past the end of the chunk.
  wc = Exec(cn.other_cn, cn.cq, Read(cn.buf + 192, cn.lkey(), 8, a.base, a.rkeys[1]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
  wc = Exec(cn.acc_cn[0], cn.cq, Read(cn.buf + 192, cn.lkey(), 8, a.base, a.rkeys[2]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
  wc = Exec(cn.acc_cn[1], cn.cq, Read(cn.buf + 192, cn.lkey(), 8, a.base + kChunk - 4, a.rkeys[2]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
  EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 192), 0u) << "no refused READ delivered data";
}

TEST_F(AllocChainTest, TwoAllocationsTakeDifferentEntriesAndAdvanceTheHead) {
  Build(4);
  Cn& cn = *cns_[0];
  const Result<AllocGrant> r1 = Alloc(cn);
  const Result<AllocGrant> r2 = Alloc(cn);
  ASSERT_TRUE(r1.ok()) << r1.status.ToString();
  ASSERT_TRUE(r2.ok()) << r2.status.ToString();
  EXPECT_EQ(r1.value.seq, 0u);
  EXPECT_EQ(r2.value.seq, 1u);
  EXPECT_EQ(r1.value.handle, md_->entry_addr(0));
  EXPECT_EQ(r2.value.handle, md_->entry_addr(1));
  EXPECT_NE(r1.value.base, r2.value.base);
  ExpectBoundTo(0, cn, r1.value);
  ExpectBoundTo(1, cn, r2.value);
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + 2 * kElementBytes);
  EXPECT_EQ(md_->LoadElement(0), 0u);
  EXPECT_EQ(md_->LoadElement(1), 0u);
  EXPECT_EQ(md_->LoadElement(2), md_->entry_addr(2));
  EXPECT_EQ(md_->LoadEntry(0).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(md_->LoadEntry(1).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(md_->LoadEntry(2).owner_id, kNoOwner);

  // Two distinct chunks: what goes into one does not show in the other.
  cn.node->memory().StoreU64(cn.buf, 0x1111);
  cn.node->memory().StoreU64(cn.buf + 8, 0x2222);
  ASSERT_EQ(Exec(cn.acc_cn[0], cn.cq, Write(cn.buf, cn.lkey(), 8, r1.value.base, r1.value.rkeys[1]))
                .status,
            WcStatus::kSuccess);
  ASSERT_EQ(
      Exec(cn.acc_cn[0], cn.cq, Write(cn.buf + 8, cn.lkey(), 8, r2.value.base, r2.value.rkeys[1]))
          .status,
      WcStatus::kSuccess);
  ASSERT_EQ(
      Exec(cn.acc_cn[1], cn.cq, Read(cn.buf + 64, cn.lkey(), 8, r1.value.base, r1.value.rkeys[2]))
          .status,
      WcStatus::kSuccess);
  ASSERT_EQ(
      Exec(cn.acc_cn[1], cn.cq, Read(cn.buf + 72, cn.lkey(), 8, r2.value.base, r2.value.rkeys[2]))
          .status,
      WcStatus::kSuccess);
  EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 64), 0x1111u);
  EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 72), 0x2222u);
}

TEST_F(AllocChainTest, TwoCnsRacingForTheHeadGetDistinctEntries) {
  Build(4, /*cns=*/2);
  Result<AllocGrant> r[2];
  for (int i = 0; i < 2; ++i) {
    sim().Spawn(AllocInto(cns_[i]->client.get(), cns_[i]->AccessQpns(), &r[i]));
  }
  sim().Run();
  ASSERT_TRUE(r[0].ok()) << r[0].status.ToString();
  ASSERT_TRUE(r[1].ok()) << r[1].status.ToString();
  EXPECT_NE(r[0].value.handle, r[1].value.handle);
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + 2 * kElementBytes);
  const std::set<uint64_t> got = {r[0].value.handle, r[1].value.handle};
  EXPECT_EQ(got, (std::set<uint64_t>{md_->entry_addr(0), md_->entry_addr(1)}));
  for (int i = 0; i < 2; ++i) {
    const int64_t e = md_->EntryOf(r[i].value.handle);
    ASSERT_GE(e, 0);
    ExpectBoundTo(static_cast<uint32_t>(e), *cns_[i], r[i].value);
    EXPECT_EQ(md_->LoadEntry(static_cast<uint32_t>(e)).owner_id, OwnerIdOfCn(i));
  }
  // CN 1 cannot reach CN 0's chunk even with CN 0's rkey.
  Cn& c1 = *cns_[1];
  const WorkCompletion wc =
      Exec(c1.acc_cn[0], c1.cq, Read(c1.buf, c1.lkey(), 8, r[0].value.base, r[0].value.rkeys[1]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
}

TEST_F(AllocChainTest, TheMnCpuDoesNoWorkForAnAllocation) {
  Build(4);
  Cn& cn = *cns_[0];
  const Ps busy = mn_->cpu().busy_ps();
  const auto by_cost = mn_->cpu().BusyByCost();
  ASSERT_GT(busy, 0) << "setup (registration, posting the chains) is charged to the MN CPU";
  const Ps t0 = rt().now();
  for (int i = 0; i < 3; ++i) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << r.status.ToString();
  }
  EXPECT_GT(rt().now(), t0);
  sim().Run();  // the last instance's tail (A's WAIT + ENABLE, L's ticket) runs after the reply
  EXPECT_EQ(mn_->cpu().busy_ps(), busy) << "an allocation must not run on the MN CPU";
  EXPECT_EQ(mn_->cpu().BusyByCost(), by_cost);
  // The RNIC did it: 3 requests taken, every WR of 3 chain instances ran.
  EXPECT_EQ(cn.chain->requests_taken(), 3u);
  EXPECT_EQ(cn.chain->worker_qp()->counters().send_wrs_executed, 3u * AllocChain::kWorkerWrs);
  EXPECT_EQ(cn.chain->alloc_qp()->counters().send_wrs_executed, 3u * AllocChain::kAllocWrs(g_));
  // The meter is live: MN CPU work (re-arming one instance) shows up.
  cluster_->RunToCompletion(cn.chain->Arm(1));
  EXPECT_GT(mn_->cpu().busy_ps(), busy);
}

TEST_F(AllocChainTest, AnEmptyQueueFaultsTheChainAndHandsOutNothingTwice) {
  Build(2, /*cns=*/2);  // ring of 2 elements, both full
  Cn& c0 = *cns_[0];
  Cn& c1 = *cns_[1];
  const Result<AllocGrant> r1 = Alloc(c0);
  const Result<AllocGrant> r2 = Alloc(c0);
  ASSERT_TRUE(r1.ok()) << r1.status.ToString();
  ASSERT_TRUE(r2.ok()) << r2.status.ToString();
  EXPECT_NE(r1.value.handle, r2.value.handle);
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr()) << "two claims wrapped a 2-slot ring";

  // CN 1 asks for a third chunk: the head is back on element 0, which CN 0's
  // first allocation zeroed.
  const Ps t0 = rt().now();
  const Result<AllocGrant> r3 = Alloc(c1);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status.code(), Code::kLaneBroken) << r3.status.ToString();
  EXPECT_NE(r3.status.message().find("no reply"), std::string::npos) << r3.status.ToString();
  EXPECT_GE(rt().now() - t0, kTimeout);
  std::vector<uint8_t> reply(ReplyBytes(g_));
  c1.node->memory().Read(c1.client->reply_addr(), reply.data(), reply.size());
  EXPECT_EQ(reply, std::vector<uint8_t>(ReplyBytes(g_), 0)) << "no reply bytes landed";

  // The fault stayed in CN 1's chain; nothing was rebound or re-owned.
  EXPECT_TRUE(c1.chain->Faulted());
  EXPECT_EQ(c1.chain->worker_qp()->state(), QpState::kErr) << "L6 read address 0";
  EXPECT_EQ(c1.chain->alloc_qp()->state(), QpState::kErr) << "placeholder binds failed";
  EXPECT_FALSE(c0.chain->Faulted());
  ExpectBoundTo(0, c0, r1.value);
  ExpectBoundTo(1, c0, r2.value);
  EXPECT_EQ(md_->LoadEntry(0).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(md_->LoadEntry(1).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(md_->LoadElement(0), 0u);
  EXPECT_EQ(md_->LoadElement(1), 0u);
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + kElementBytes) << "the failed claim still moved it";

  // CN 1's lane is dead: a retry fails at once instead of being served.
  const Ps t1 = rt().now();
  const Result<AllocGrant> r4 = Alloc(c1);
  EXPECT_EQ(r4.status.code(), Code::kLaneBroken);
  EXPECT_LT(rt().now() - t1, kTimeout);
  // And CN 0, whose chain is healthy, meets the same empty queue.
  const Result<AllocGrant> r5 = Alloc(c0);
  EXPECT_FALSE(r5.ok());
  EXPECT_TRUE(c0.chain->Faulted());
  ExpectBoundTo(0, c0, r1.value);
  ExpectBoundTo(1, c0, r2.value);
}

TEST_F(AllocChainTest, ABadAccessQpnFaultsOnlyTheRequestersChain) {
  Build(4, /*cns=*/2);
  Cn& bad = *cns_[0];
  Cn& good = *cns_[1];
  // A qpn that names no QP: its bind fails, after the chain claimed entry 0.
  Result<AllocGrant> r;
  cluster_->RunToCompletion(AllocInto(bad.client.get(), {bad.acc_mn[0]->qp_num(), 0xabcdef}, &r));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(bad.chain->Faulted());
  // The dead chain's later instances claim nothing (the flushes that release
  // its WAITs do not release the next instance's ticket).
  sim().Run();
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + kElementBytes);
  for (uint32_t e = 1; e < 4; ++e) EXPECT_EQ(md_->LoadElement(e), md_->entry_addr(e));
  // The claimed entry stays with the requester (owner_id says whose: crash
  // reclamation can take it back); MW 0 went to its Free QP, MW 2 nowhere.
  EXPECT_EQ(md_->LoadEntry(0).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(Window(0, 0)->qpn_, bad.free_mn->qp_num());
  EXPECT_EQ(Window(0, 2)->state_, SimMw::State::kFree);
  // Others are served as before.
  const Result<AllocGrant> g = Alloc(good);
  ASSERT_TRUE(g.ok()) << g.status.ToString();
  EXPECT_EQ(g.value.handle, md_->entry_addr(1));
  ExpectBoundTo(1, good, g.value);
  EXPECT_FALSE(good.chain->Faulted());
}

TEST_F(AllocChainTest, TheHeadWrapsModuloTheRing) {
  Build(3);  // 4 slots
  Cn& cn = *cns_[0];
  // The MN places the three entries so the queue spans the ring's end:
  // slots 3, 0, 1; slot 2 empty; head on slot 3.
  md_->StoreElement(3, md_->entry_addr(0));
  md_->StoreElement(0, md_->entry_addr(1));
  md_->StoreElement(1, md_->entry_addr(2));
  md_->StoreElement(2, 0);
  md_->StoreHead(md_->ring_addr() + 3 * kElementBytes);
  for (uint32_t e = 0; e < 3; ++e) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << "allocation " << e << ": " << r.status.ToString();
    EXPECT_EQ(r.value.handle, md_->entry_addr(e));
    ExpectBoundTo(e, cn, r.value);
  }
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + 2 * kElementBytes);
  for (uint32_t s = 0; s < 4; ++s) EXPECT_EQ(md_->LoadElement(s), 0u) << "slot " << s;
  EXPECT_FALSE(Alloc(cn).ok()) << "slot 2 was empty";
}

// ---- Recycling: the CN re-arms the chain; the MN CPU never posts again --------

TEST_F(AllocChainTest, ARecyclingChainServesFourRoundsOfItsInstancesWithoutTheMnCpu) {
  constexpr uint32_t kK = 4;
  constexpr uint32_t kAllocs = 5 * kK;
  recycle_ = true;
  Build(kAllocs, /*cns=*/1, /*g=*/3, kK);
  Cn& cn = *cns_[0];
  sim().Run();
  const Ps busy = mn_->cpu().busy_ps();
  const auto by_cost = mn_->cpu().BusyByCost();
  const uint64_t a_posted = cn.chain->alloc_qp()->next_send_index();
  const uint64_t c_posted = cn.chain->control_qp()->next_send_index();
  EXPECT_EQ(a_posted, kK * AllocChain::AllocSlotWrs(g_));
  EXPECT_EQ(cn.chain->alloc_qp()->send_ring_size(), a_posted) << "the ring holds exactly K";
  std::set<uint64_t> handles;
  std::vector<AllocGrant> grants;
  for (uint32_t i = 0; i < kAllocs; ++i) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << "allocation " << i << " (round " << i / kK
                        << "): " << r.status.ToString();
    EXPECT_EQ(r.value.seq, i);
    EXPECT_EQ(r.value.handle, md_->entry_addr(i)) << "allocation " << i;
    EXPECT_EQ(r.value.base, md_->chunk_addr(i));
    EXPECT_TRUE(handles.insert(r.value.handle).second) << "entry handed out twice: " << i;
    grants.push_back(r.value);
  }
  sim().Run();
  // Every grant still holds: its windows bound to this CN's QPs, entry owned.
  for (uint32_t i = 0; i < kAllocs; ++i) {
    ExpectBoundTo(i, cn, grants[i]);
    EXPECT_EQ(md_->LoadEntry(i).owner_id, OwnerIdOfCn(0)) << "entry " << i;
    EXPECT_EQ(md_->LoadElement(i), 0u) << "claimed element " << i << " zeroed";
  }
  // Data through a window of the last round.
  ASSERT_NO_FATAL_FAILURE(ExpectDataThroughWindows(cn, grants.back()));

  // No MN CPU after setup, and nothing posted: the WQEs ran again in place.
  EXPECT_EQ(mn_->cpu().busy_ps(), busy) << "recycling must not run on the MN CPU";
  EXPECT_EQ(mn_->cpu().BusyByCost(), by_cost);
  EXPECT_EQ(cn.chain->alloc_qp()->next_send_index(), a_posted);
  EXPECT_EQ(cn.chain->control_qp()->next_send_index(), c_posted);
  EXPECT_EQ(cn.chain->requests_taken(), kAllocs);
  EXPECT_EQ(cn.chain->worker_qp()->counters().send_wrs_executed,
            uint64_t{kAllocs} * AllocChain::kWorkerWrs);
  EXPECT_EQ(cn.chain->alloc_qp()->counters().send_wrs_executed,
            uint64_t{kAllocs} * AllocChain::AllocSlotWrs(g_));
  EXPECT_FALSE(cn.chain->Faulted());

  // The MN unbinds the group that instance slot 0 bound last round (as a
  // free would): its windows are free again, and the WQEs of slot 0 still
  // named them until L8 put the placeholders back.
  const uint32_t stale = kAllocs - kK;
  ASSERT_NO_FATAL_FAILURE(UnbindAsAFree(stale, grants[stale]));

  // Round 6 meets the empty queue: L6 faults and its error completion lets
  // C enable the binds, which fail on the restored rkey 0 (not rebinding the
  // stale, now free group); nothing is handed out, and the dead chain claims
  // nothing more.
  const Result<AllocGrant> r = Alloc(cn);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status.code(), Code::kLaneBroken) << r.status.ToString();
  sim().Run();
  EXPECT_TRUE(cn.chain->Faulted());
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr() + (kAllocs + 1) * kElementBytes);
  for (uint32_t k = 0; k < g_; ++k) {
    EXPECT_EQ(Window(stale, k)->state_, SimMw::State::kFree) << "stale bind of MW " << k;
  }
  for (uint32_t i = 0; i < kAllocs; ++i) {
    if (i != stale) ExpectBoundTo(i, cn, grants[i]);
  }
  EXPECT_EQ(mn_->cpu().busy_ps(), busy);
}

TEST_F(AllocChainTest, ABadRequestInALaterRoundFaultsOnlyTheRequestersRecyclingChain) {
  constexpr uint32_t kK = 4;
  recycle_ = true;
  Build(32, /*cns=*/2, /*g=*/3, kK);
  Cn& bad = *cns_[0];
  Cn& good = *cns_[1];
  sim().Run();
  const Ps busy = mn_->cpu().busy_ps();
  for (uint32_t i = 0; i < kK + 1; ++i) {
    const Result<AllocGrant> r = Alloc(bad);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status.ToString();
  }
  // Instance 5 (slot 1, second round) names a qpn that is no QP.
  Result<AllocGrant> r;
  cluster_->RunToCompletion(AllocInto(bad.client.get(), {bad.acc_mn[0]->qp_num(), 0xabcdef}, &r));
  EXPECT_FALSE(r.ok());
  sim().Run();
  EXPECT_TRUE(bad.chain->Faulted());
  const uint64_t head = md_->LoadHead();
  EXPECT_EQ(head, md_->ring_addr() + (kK + 2) * kElementBytes) << "one claim for the bad request";
  const uint32_t bad_entry = kK + 1;
  EXPECT_EQ(md_->LoadEntry(bad_entry).owner_id, OwnerIdOfCn(0));
  EXPECT_EQ(Window(bad_entry, 0)->qpn_, bad.free_mn->qp_num());
  EXPECT_EQ(Window(bad_entry, 2)->state_, SimMw::State::kFree);
  // The other CN is served for several rounds of its own chain.
  std::set<uint64_t> handles;
  for (uint32_t i = 0; i < 3 * kK; ++i) {
    const Result<AllocGrant> g = Alloc(good);
    ASSERT_TRUE(g.ok()) << i << ": " << g.status.ToString();
    const uint32_t entry = kK + 2 + i;
    EXPECT_EQ(g.value.handle, md_->entry_addr(entry));
    ExpectBoundTo(entry, good, g.value);
    EXPECT_TRUE(handles.insert(g.value.handle).second);
  }
  sim().Run();
  EXPECT_FALSE(good.chain->Faulted());
  EXPECT_EQ(md_->LoadHead(), head + 3 * kK * kElementBytes) << "the dead chain claimed nothing";
  EXPECT_EQ(mn_->cpu().busy_ps(), busy);
}

TEST(OnesidedMwRecycle, SlotPaddingAndTheValuesTheCnScattersAreComputedOnce) {
  EXPECT_EQ(AllocChain::AllocSlotWrs(3), 8u);
  EXPECT_EQ(AllocChain::AllocSlotWrs(5), 8u);
  EXPECT_EQ(AllocChain::AllocSlotWrs(6), 8u);
  EXPECT_EQ(AllocChain::AllocSlotWrs(7), 16u);
  const std::vector<uint64_t> v0 = AllocChain::ControlValues(0, 3, true);
  const std::vector<uint64_t> v5 = AllocChain::ControlValues(5, 3, true);
  ASSERT_EQ(v0.size(), AllocChain::kControlWrs + 1);
  EXPECT_EQ(v5[1], 12u) << "two RECVs per request";
  EXPECT_EQ(v5[11], 5u) << "instances 0..4 have enabled their part of A";
  EXPECT_EQ(v5[12], 6u * 8) << "A's instance is padded to 8 WQEs";
  EXPECT_EQ(v5[13], 16u * 7) << "C enables itself through the next instance";
  // Four lanes: instance 5 is lane 1's second; its L and C counts are the
  // lane's own, its A index and request count absolute.
  const std::vector<uint64_t> w5 = AllocChain::ControlValues(5, 3, true, 4);
  EXPECT_EQ(w5[0], 8u) << "lane 1's previous ticket: its first instance's 8 steps";
  EXPECT_EQ(w5[1], 12u);
  EXPECT_EQ(w5[12], 6u * 8);
  EXPECT_EQ(w5[13], 16u * 3) << "C_1 enables itself through its third instance";
}

}  // namespace
}  // namespace dmb::sim::testing

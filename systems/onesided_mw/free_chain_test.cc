// OneSidedMW's free WR chain on the simulated RNIC: a CN's SEND on its Free
// QP makes the MN's RNIC unbind the entry's MW group (MW 0 only for its
// owner), clear owner_id and put the entry back at the queue's tail, with
// the MN CPU idle.
#include "systems/onesided_mw/free_chain.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "fabric/sim/test_util.h"
#include "systems/onesided_mw/alloc_chain.h"

namespace dmb::sim::testing {
namespace {

using systems::Code;
using systems::Result;
using systems::Status;
using namespace systems::onesided_mw;

constexpr uint64_t kChunk = 4096;
constexpr Ps kTimeout = 1000 * kPsPerUs;

// One CN: alloc client and chain, free client and chain (whose F is the MN
// end of the CN's Free QP, where the alloc chain binds MW 0), G-1 access QPs.
struct Cn {
  uint32_t index = 0;
  Node* node = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  uint64_t buf = 0;
  Mr* mr = nullptr;
  std::unique_ptr<AllocClient> alloc;
  std::unique_ptr<FreeClient> free;
  std::vector<Qp*> acc_cn, acc_mn;
  std::unique_ptr<AllocChain> achain;
  std::unique_ptr<FreeChain> fchain;

  std::vector<uint32_t> AccessQpns() const {
    std::vector<uint32_t> q;
    for (Qp* m : acc_mn) q.push_back(m->qp_num());
    return q;
  }
  std::vector<uint32_t> WantQpns() const {
    std::vector<uint32_t> q = {fchain->free_qp()->qp_num()};
    for (Qp* m : acc_mn) q.push_back(m->qp_num());
    return q;
  }
  uint32_t lkey() const { return mr->lkey(); }
};

// What a free must not change when it is refused.
struct Snapshot {
  uint64_t head = 0, tail = 0;
  std::vector<uint64_t> elements;
  std::vector<uint64_t> owners;
  std::vector<int> states;  // entry-major MW states
  std::vector<uint32_t> qpns;
  bool operator==(const Snapshot&) const = default;
};

class FreeChainTest : public SimFixture {
 protected:
  void Build(uint32_t entries, int cns = 1, uint32_t g = 3, uint32_t instances = 8) {
    g_ = g;
    mn_ = AddNode("mn");
    data_pd_ = mn_->AllocPd();
    mn_cq_ = mn_->CreateCq(1024);
    const uint64_t pool = mn_->memory().Alloc(entries * kChunk, 4096);
    pool_mr_ = RegMr(mn_, data_pd_, pool, entries * kChunk, kLocalWrite | kMwBind);
    cluster_->RunToCompletion([](Node* mn, Pd* pd, Mr* pool, MetadataConfig c,
                                 std::unique_ptr<Metadata>* out) -> Task<void> {
      *out = co_await Metadata::Create(mn, pd, pool, c);
    }(mn_, data_pd_, pool_mr_, MetadataConfig{g, entries, kChunk}, &md_));
    for (int i = 0; i < cns; ++i) AddCn(static_cast<uint32_t>(i), instances);
  }

  void AddCn(uint32_t index, uint32_t instances) {
    auto cn = std::make_unique<Cn>();
    cn->index = index;
    cn->node = AddNode("cn" + std::to_string(index));
    cn->pd = cn->node->AllocPd();
    cn->cq = cn->node->CreateCq(64);
    cn->buf = cn->node->memory().Alloc(1 << 16);
    cn->mr = RegMr(cn->node, cn->pd, cn->buf, 1 << 16);
    const uint32_t rec = recycle_ ? instances : 0;
    cn->alloc =
        std::make_unique<AllocClient>(cn->node, cn->pd, &rt(), cn->mr, cn->buf + 0x8000, g_, rec);
    cn->free = std::make_unique<FreeClient>(cn->node, cn->pd, &rt(), cn->mr, cn->buf + 0x7000,
                                            cn->node->CreateCq(64), rec, g_, lanes_);
    for (uint32_t k = 1; k < g_; ++k) {
      Qp* c = MakeQp(cn->node, cn->pd, cn->cq);
      Qp* m = MakeQp(mn_, data_pd_, mn_cq_);
      cluster_->Connect(c, m);
      cn->acc_cn.push_back(c);
      cn->acc_mn.push_back(m);
    }
    FreeChainConfig fc;
    fc.max_instances = instances;
    fc.recycle = recycle_;
    fc.lanes = lanes_;
    cluster_->RunToCompletion([](SimCluster* cl, Metadata* md, FreeChainConfig fc,
                                 std::unique_ptr<FreeChain>* out) -> Task<void> {
      *out = co_await FreeChain::Create(cl, md, fc);
    }(cluster_.get(), md_.get(), fc, &cn->fchain));
    cluster_->Connect(cn->free->qp(), cn->fchain->free_qp());
    cluster_->Connect(cn->free->reply_qp(), cn->fchain->reply_qp());
    cluster_->RunToCompletion(cn->fchain->Arm(instances));

    AllocChainConfig cc;
    cc.free_qpn = cn->fchain->free_qp()->qp_num();
    cc.owner_id = OwnerIdOfCn(index);
    cc.max_instances = instances;
    cc.recycle = recycle_;
    cluster_->RunToCompletion([](SimCluster* cl, Metadata* md, AllocChainConfig cc,
                                 std::unique_ptr<AllocChain>* out) -> Task<void> {
      *out = co_await AllocChain::Create(cl, md, cc);
    }(cluster_.get(), md_.get(), cc, &cn->achain));
    cluster_->Connect(cn->alloc->qp(), cn->achain->alloc_qp());
    cluster_->RunToCompletion(cn->achain->Arm(instances));
    cns_.push_back(std::move(cn));
  }

  static Task<void> AllocInto(AllocClient* c, std::vector<uint32_t> qpns, Result<AllocGrant>* out) {
    *out = co_await c->Allocate(std::move(qpns), kTimeout);
  }
  Result<AllocGrant> Alloc(Cn& cn) {
    Result<AllocGrant> r;
    cluster_->RunToCompletion(AllocInto(cn.alloc.get(), cn.AccessQpns(), &r));
    return r;
  }
  static Task<void> FreeInto(FreeClient* c, uint64_t handle, Status* out) {
    *out = co_await c->Free(handle, kTimeout);
  }
  Status Free(Cn& cn, uint64_t handle) {
    Status s;
    cluster_->RunToCompletion(FreeInto(cn.free.get(), handle, &s));
    return s;
  }
  // Frees every handle at once (as many in flight as the client allows);
  // returns how long the whole batch took.
  Ps FreeAll(Cn& cn, const std::vector<uint64_t>& handles, std::vector<Status>* out) {
    out->assign(handles.size(), Status());
    const Ps t0 = sim().now();
    Ps last = t0;  // when the last free returned (the deadlines' timers run on)
    size_t returned = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      rt().Spawn([](FreeChainTest* t, FreeClient* c, uint64_t h, Status* st, Ps* last,
                    size_t* returned) -> Task<void> {
        *st = co_await c->Free(h, kTimeout);
        *last = std::max(*last, t->sim().now());
        ++*returned;
      }(this, cn.free.get(), handles[i], &(*out)[i], &last, &returned));
    }
    sim().Run();
    // A free still waiting when nothing is left to run would read as OK.
    EXPECT_EQ(returned, handles.size()) << "frees that never returned";
    return last - t0;
  }

  SimMw* Window(uint32_t entry, uint32_t k) { return static_cast<SimMw*>(md_->mw(entry, k)); }

  void ExpectBoundTo(uint32_t entry, const Cn& cn, const AllocGrant& grant) {
    const std::vector<uint32_t> want = cn.WantQpns();
    ASSERT_EQ(grant.rkeys.size(), g_);
    for (uint32_t k = 0; k < g_; ++k) {
      SimMw* mw = Window(entry, k);
      EXPECT_EQ(mw->state_, SimMw::State::kValid) << "entry " << entry << " MW " << k;
      EXPECT_EQ(mw->qpn_, want[k]) << "entry " << entry << " MW " << k;
      EXPECT_EQ(mw->addr_, md_->chunk_addr(entry)) << "MW " << k;
      EXPECT_EQ(grant.rkeys[k], mw->rkey()) << "MW " << k;
    }
  }
  void ExpectUnbound(uint32_t entry) {
    for (uint32_t k = 0; k < g_; ++k) {
      EXPECT_EQ(Window(entry, k)->state_, SimMw::State::kFree) << "entry " << entry << " MW " << k;
    }
  }

  Snapshot Snap() {
    Snapshot s;
    s.head = md_->LoadHead();
    s.tail = md_->LoadTail();
    for (uint32_t i = 0; i < md_->layout().ring_slots; ++i)
      s.elements.push_back(md_->LoadElement(i));
    for (uint32_t e = 0; e < md_->layout().entries; ++e) {
      s.owners.push_back(md_->LoadEntry(e).owner_id);
      for (uint32_t k = 0; k < g_; ++k) {
        s.states.push_back(static_cast<int>(Window(e, k)->state_));
        s.qpns.push_back(Window(e, k)->qpn_);
      }
    }
    return s;
  }

  // The owner can still use the whole group: WRITE through access QP 1, READ
  // back through the last access QP and through its Free QP (MW 0).
  void ExpectUsable(Cn& cn, const AllocGrant& a, uint64_t pattern) {
    cn.node->memory().StoreU64(cn.buf, pattern);
    WorkCompletion wc = Exec(cn.acc_cn[0], cn.cq, Write(cn.buf, cn.lkey(), 8, a.base, a.rkeys[1]));
    ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
    wc = Exec(cn.acc_cn.back(), cn.cq, Read(cn.buf + 64, cn.lkey(), 8, a.base, a.rkeys[g_ - 1]));
    ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
    EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 64), pattern);
    wc = Exec(cn.free->qp(), cn.free->send_cq(),
              Read(cn.buf + 128, cn.lkey(), 8, a.base, a.rkeys[0]));
    ASSERT_EQ(wc.status, WcStatus::kSuccess) << WcStatusName(wc.status);
    EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 128), pattern);
  }

  // A refused free: no reply (kNotOwner: this request was refused, not
  // flushed behind another), the requester's Free lane is dead.
  void ExpectRefused(const Status& s) {
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Code::kNotOwner) << s.ToString();
    EXPECT_NE(s.message().find("no reply"), std::string::npos) << s.ToString();
  }

  uint32_t g_ = 3;
  uint32_t lanes_ = 1;    // the free chain's (and its client's)
  bool recycle_ = false;  // both chains re-armed by the CN's requests
  Node* mn_ = nullptr;
  Pd* data_pd_ = nullptr;
  Cq* mn_cq_ = nullptr;
  Mr* pool_mr_ = nullptr;
  std::unique_ptr<Metadata> md_;
  std::vector<std::unique_ptr<Cn>> cns_;
};

TEST_F(FreeChainTest, AFreeUnbindsTheGroupClearsTheOwnerAndReinsertsAtTheTail) {
  Build(4);
  Cn& cn = *cns_[0];
  const Result<AllocGrant> r = Alloc(cn);
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  const AllocGrant& a = r.value;
  ASSERT_EQ(a.handle, md_->entry_addr(0));
  ExpectBoundTo(0, cn, a);
  const uint64_t head = md_->LoadHead();
  const uint64_t old_tail = md_->LoadTail();
  EXPECT_EQ(old_tail, md_->ring_addr()) << "4 entries fill a 4-slot ring: the tail wrapped";
  EXPECT_EQ(md_->LoadElement(0), 0u);

  const Status s = Free(cn, a.handle);
  ASSERT_TRUE(s.ok()) << s.ToString();
  sim().Run();
  ExpectUnbound(0);
  EXPECT_EQ(md_->LoadEntry(0).owner_id, kNoOwner);
  EXPECT_EQ(md_->LoadElement(0), md_->entry_addr(0)) << "back in the queue at the old tail";
  EXPECT_EQ(md_->LoadTail(), md_->layout().Advance(old_tail, 1, md_->ring_addr()));
  EXPECT_EQ(md_->LoadTail(), old_tail + kElementBytes);
  EXPECT_EQ(md_->LoadHead(), head) << "a free never moves the head";
  for (uint32_t e = 1; e < 4; ++e) EXPECT_EQ(md_->LoadElement(e), md_->entry_addr(e));
  EXPECT_EQ(md_->LoadEntry(0).handle, md_->entry_addr(0)) << "the entry's constants survive";
  EXPECT_FALSE(cn.fchain->Faulted());
  EXPECT_EQ(cn.fchain->requests_taken(), 1u);
  EXPECT_EQ(cn.fchain->worker_qp()->counters().send_wrs_executed, FreeChain::kWorkerWrs);

  // The old rkeys through the old QPs are refused (each refusal kills that
  // lane, so the Free QP goes last).
  WorkCompletion wc =
      Exec(cn.acc_cn[0], cn.cq, Read(cn.buf + 192, cn.lkey(), 8, a.base, a.rkeys[1]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
  wc = Exec(cn.acc_cn[1], cn.cq, Write(cn.buf + 192, cn.lkey(), 8, a.base, a.rkeys[2]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
  wc =
      Exec(cn.free->qp(), cn.free->send_cq(), Read(cn.buf + 192, cn.lkey(), 8, a.base, a.rkeys[0]));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << WcStatusName(wc.status);
  EXPECT_EQ(cn.node->memory().LoadU64(cn.buf + 192), 0u);
}

TEST_F(FreeChainTest, TheRingCyclesAllocateAllFreeAllAllocateAgain) {
  Build(4);
  Cn& cn = *cns_[0];
  std::vector<AllocGrant> got;
  for (uint32_t e = 0; e < 4; ++e) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << "allocation " << e << ": " << r.status.ToString();
    EXPECT_EQ(r.value.handle, md_->entry_addr(e));
    got.push_back(r.value);
  }
  EXPECT_EQ(md_->LoadHead(), md_->ring_addr()) << "four claims wrapped the head";
  for (uint32_t s = 0; s < 4; ++s) EXPECT_EQ(md_->LoadElement(s), 0u);

  // Free out of order: 2, 0, 3, 1. They fill slots 0..3 in that order.
  const uint32_t order[4] = {2, 0, 3, 1};
  for (uint32_t i = 0; i < 4; ++i) {
    const Status s = Free(cn, got[order[i]].handle);
    ASSERT_TRUE(s.ok()) << "free " << i << ": " << s.ToString();
    EXPECT_EQ(md_->LoadTail(), md_->layout().Advance(md_->ring_addr(), i + 1, md_->ring_addr()));
  }
  sim().Run();
  EXPECT_EQ(md_->LoadTail(), md_->ring_addr()) << "the masked FAA wrapped the tail";
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(md_->LoadElement(i), md_->entry_addr(order[i])) << "slot " << i;
    ExpectUnbound(i);
    EXPECT_EQ(md_->LoadEntry(i).owner_id, kNoOwner);
  }

  // Allocate again: the entries come back in the order they were freed.
  for (uint32_t i = 0; i < 4; ++i) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << "re-allocation " << i << ": " << r.status.ToString();
    EXPECT_EQ(r.value.handle, md_->entry_addr(order[i]));
    ExpectBoundTo(order[i], cn, r.value);
    EXPECT_EQ(md_->LoadEntry(order[i]).owner_id, OwnerIdOfCn(0));
    got[order[i]] = r.value;
  }
  ExpectUsable(cn, got[3], 0x5555);
  EXPECT_FALSE(cn.fchain->Faulted());
  EXPECT_FALSE(cn.achain->Faulted());
  // A second lap of frees works too (instances 4..7 of the free chain).
  for (uint32_t e = 0; e < 4; ++e) ASSERT_TRUE(Free(cn, got[e].handle).ok()) << e;
  EXPECT_EQ(md_->LoadTail(), md_->ring_addr());
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(md_->LoadElement(i), md_->entry_addr(i));
}

TEST_F(FreeChainTest, FreeingAnotherCnsEntryOrAForgedAddressFailsAtMw0AndChangesNothing) {
  Build(4, /*cns=*/5);
  Cn& owner = *cns_[0];
  const Result<AllocGrant> r = Alloc(owner);
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  const AllocGrant a = r.value;
  // CN 1 owns an entry too (its Free QP holds a valid MW 0 of its own).
  const Result<AllocGrant> r1 = Alloc(*cns_[1]);
  ASSERT_TRUE(r1.ok()) << r1.status.ToString();
  const Snapshot before = Snap();

  struct Attempt {
    uint32_t cn;
    uint64_t handle;
    const char* what;
  };
  const Attempt attempts[] = {
      {1, a.handle, "another CN's entry"},
      {2, md_->entry_addr(3), "an entry nobody owns (MW 0 unbound)"},
      {3, a.handle + 16, "inside the owner's entry: MW 1's key, bound to an access QP"},
      {4, md_->head_addr(), "the queue head"},
  };
  for (const Attempt& at : attempts) {
    Cn& cn = *cns_[at.cn];
    const Status s = Free(cn, at.handle);
    ExpectRefused(s);
    sim().Run();
    EXPECT_EQ(Snap(), before) << at.what;
    EXPECT_EQ(cn.fchain->free_qp()->state(), QpState::kErr) << at.what << ": LOCAL_INV of MW 0";
    EXPECT_EQ(cn.fchain->unbind_qp()->state(), QpState::kRts) << at.what;
    EXPECT_EQ(cn.fchain->worker_qp()->state(), QpState::kRts) << at.what;
    EXPECT_EQ(cn.fchain->unbind_qp()->counters().send_wrs_executed, 0u) << at.what;
    EXPECT_EQ(cn.fchain->worker_qp()->counters().send_wrs_executed, 1u)
        << at.what << ": only L1 (READ entry) ran";
  }
  // The owner's group is intact and usable, and it can still free it.
  ExpectBoundTo(0, owner, a);
  ExpectUsable(owner, a, 0x77);
  EXPECT_FALSE(owner.fchain->Faulted());
  const uint64_t tail = md_->LoadTail();
  ASSERT_TRUE(Free(owner, a.handle).ok());
  ExpectUnbound(0);
  EXPECT_EQ(md_->LoadTail(), md_->layout().Advance(tail, 1, md_->ring_addr()));

  // A double free is refused the same way (MW 0 is no longer valid).
  const Snapshot after = Snap();
  ExpectRefused(Free(owner, a.handle));
  sim().Run();
  EXPECT_EQ(Snap(), after);
}

TEST_F(FreeChainTest, AnAddressOutsideTheMetadataFaultsTheWorkerAndChangesNothing) {
  Build(4, /*cns=*/2);
  const Result<AllocGrant> r = Alloc(*cns_[0]);
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  const Snapshot before = Snap();
  Cn& bad = *cns_[1];
  ExpectRefused(Free(bad, 8));
  sim().Run();
  EXPECT_EQ(Snap(), before);
  EXPECT_EQ(bad.fchain->worker_qp()->state(), QpState::kErr) << "L1 READ address 8";
  EXPECT_EQ(bad.fchain->free_qp()->state(), QpState::kErr) << "placeholder LOCAL_INV (rkey 0)";
  EXPECT_EQ(bad.fchain->unbind_qp()->counters().send_wrs_executed, 0u);
  ExpectUsable(*cns_[0], r.value, 0x99);
}

TEST_F(FreeChainTest, TheMnCpuDoesNoWorkForAFree) {
  Build(4);
  Cn& cn = *cns_[0];
  std::vector<AllocGrant> got;
  for (int i = 0; i < 3; ++i) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << r.status.ToString();
    got.push_back(r.value);
  }
  sim().Run();
  const Ps busy = mn_->cpu().busy_ps();
  const auto by_cost = mn_->cpu().BusyByCost();
  ASSERT_GT(busy, 0);
  const Ps t0 = rt().now();
  for (const AllocGrant& a : got) ASSERT_TRUE(Free(cn, a.handle).ok());
  sim().Run();
  EXPECT_GT(rt().now(), t0);
  EXPECT_EQ(mn_->cpu().busy_ps(), busy) << "a free must not run on the MN CPU";
  EXPECT_EQ(mn_->cpu().BusyByCost(), by_cost);
  EXPECT_EQ(cn.fchain->requests_taken(), 3u);
  EXPECT_EQ(cn.fchain->worker_qp()->counters().send_wrs_executed, 3u * FreeChain::kWorkerWrs);
  EXPECT_EQ(cn.fchain->unbind_qp()->counters().send_wrs_executed, 3u * FreeChain::kUnbindWrs(g_));
  EXPECT_EQ(cn.fchain->free_qp()->counters().send_wrs_executed, 3u * FreeChain::kFreeWrs);
}

// A free that faults after MW 0 (at MW k, on U): the ticket keeps the later
// pre-posted instances from running, even on requests that land after it.
TEST_F(FreeChainTest, AFreeFaultingAtMwKStopsTheChainBeforeTheQueue) {
  Build(4);
  Cn& cn = *cns_[0];
  const Result<AllocGrant> good = Alloc(cn);
  ASSERT_TRUE(good.ok()) << good.status.ToString();
  // A bad allocation request (no QP 0xabcdef): entry 1 is claimed and owned,
  // MW 0 is bound to this CN's Free QP, MW 1 bound, MW 2 not.
  Result<AllocGrant> bad;
  cluster_->RunToCompletion(AllocInto(cn.alloc.get(), {cn.acc_mn[0]->qp_num(), 0xabcdef}, &bad));
  ASSERT_FALSE(bad.ok());
  sim().Run();
  ASSERT_EQ(Window(1, 0)->state_, SimMw::State::kValid);
  ASSERT_EQ(Window(1, 2)->state_, SimMw::State::kFree);
  const Snapshot before = Snap();

  // Two requests back to back on the Free QP: the half-bound entry 1, then
  // the healthy entry 0.
  Qp* qp = cn.free->qp();
  for (int i = 0; i < 2; ++i) {
    const uint64_t h = i == 0 ? md_->entry_addr(1) : good.value.handle;
    uint8_t b[8];
    fabric::StoreBe64(b, h);
    cn.node->memory().Write(cn.buf + 0x100 + 8 * i, b, 8);
    ASSERT_EQ(qp->PostRecv(RecvWr{}), 0);
    SendWr s;
    s.opcode = Opcode::kSend;
    s.sg_list = {{cn.buf + 0x100 + 8u * i, 8, cn.lkey()}};
    ASSERT_EQ(qp->PostSend(s), 0);
  }
  sim().Run();
  EXPECT_EQ(cn.fchain->requests_taken(), 2u) << "both requests landed";
  EXPECT_EQ(cn.fchain->unbind_qp()->state(), QpState::kErr) << "LOCAL_INV of unbound MW 2";
  EXPECT_EQ(cn.fchain->free_qp()->state(), QpState::kRts) << "MW 0 was this CN's";
  EXPECT_EQ(cn.fchain->worker_qp()->state(), QpState::kRts);
  EXPECT_EQ(cn.fchain->worker_qp()->counters().send_wrs_executed, 1u)
      << "only instance 0's L1: L2.. (owner, tail, queue) never enabled, instance 1 never "
         "started";
  // What did change: entry 1's MW 0 and MW 1 (the faulted free unbound them).
  // Owner, tail, queue and entry 0 did not.
  const Snapshot after = Snap();
  EXPECT_EQ(after.head, before.head);
  EXPECT_EQ(after.tail, before.tail);
  EXPECT_EQ(after.elements, before.elements);
  EXPECT_EQ(after.owners, before.owners);
  EXPECT_EQ(md_->LoadEntry(1).owner_id, OwnerIdOfCn(0)) << "still owned: reclaimable";
  ExpectUnbound(1);
  ExpectBoundTo(0, cn, good.value);
  // No reply reached the CN.
  WorkCompletion wc;
  EXPECT_EQ(cn.free->recv_cq()->Poll(std::span<WorkCompletion>(&wc, 1)), 0);
}

// ---- Recycling: both chains re-armed by the CN's requests, no MN CPU -----------

TEST_F(FreeChainTest, RecyclingChainsAllocateAndFreeForManyRoundsWithoutTheMnCpu) {
  constexpr uint32_t kK = 4;
  constexpr uint32_t kLaps = 4 * kK;  // each lap: 2 allocations, 2 frees
  recycle_ = true;
  Build(/*entries=*/4, /*cns=*/1, /*g=*/3, kK);
  Cn& cn = *cns_[0];
  sim().Run();
  const Ps busy = mn_->cpu().busy_ps();
  const auto by_cost = mn_->cpu().BusyByCost();
  for (uint32_t lap = 0; lap < kLaps; ++lap) {
    std::vector<AllocGrant> held;
    for (int j = 0; j < 2; ++j) {
      const Result<AllocGrant> r = Alloc(cn);
      ASSERT_TRUE(r.ok()) << "lap " << lap << " allocation " << j << ": " << r.status.ToString();
      held.push_back(r.value);
    }
    ASSERT_NE(held[0].handle, held[1].handle) << "lap " << lap;
    for (const AllocGrant& a : held) {
      const uint32_t e =
          static_cast<uint32_t>((a.handle - md_->entry_addr(0)) / md_->layout().entry_stride);
      ASSERT_EQ(md_->entry_addr(e), a.handle);
      ExpectBoundTo(e, cn, a);
      EXPECT_EQ(md_->LoadEntry(e).owner_id, OwnerIdOfCn(0));
    }
    ExpectUsable(cn, held[lap % 2], 0x1000 + lap);
    // Free in alternating order, so the queue's order keeps changing.
    for (int j = 0; j < 2; ++j) {
      const AllocGrant& a = held[(lap + j) % 2];
      const Status s = Free(cn, a.handle);
      ASSERT_TRUE(s.ok()) << "lap " << lap << " free " << j << ": " << s.ToString();
      const uint32_t e =
          static_cast<uint32_t>((a.handle - md_->entry_addr(0)) / md_->layout().entry_stride);
      ExpectUnbound(e);
      EXPECT_EQ(md_->LoadEntry(e).owner_id, kNoOwner);
    }
  }
  sim().Run();
  // 32 allocations and 32 frees through 4 pre-posted instances each.
  EXPECT_EQ(cn.achain->requests_taken(), 2u * kLaps);
  EXPECT_EQ(cn.fchain->requests_taken(), 2u * kLaps);
  EXPECT_EQ(md_->LoadHead(), md_->LoadTail()) << "every claimed element was refilled";
  std::vector<uint64_t> in_queue;
  for (uint32_t i = 0; i < 4; ++i) in_queue.push_back(md_->LoadElement(i));
  std::sort(in_queue.begin(), in_queue.end());
  for (uint32_t e = 0; e < 4; ++e) {
    EXPECT_EQ(in_queue[e], md_->entry_addr(e)) << "each entry exactly once in the queue";
    ExpectUnbound(e);
  }
  EXPECT_FALSE(cn.achain->Faulted());
  EXPECT_FALSE(cn.fchain->Faulted());
  EXPECT_EQ(mn_->cpu().busy_ps(), busy) << "recycling must not run on the MN CPU";
  EXPECT_EQ(mn_->cpu().BusyByCost(), by_cost);
}

TEST_F(FreeChainTest, ARecyclingFreeChainStillRefusesANonOwnerInALaterRound) {
  constexpr uint32_t kK = 4;
  recycle_ = true;
  Build(/*entries=*/8, /*cns=*/2, /*g=*/3, kK);
  Cn& c0 = *cns_[0];
  Cn& c1 = *cns_[1];
  // CN 0 goes round its free chain once and a bit (5 frees).
  for (uint32_t i = 0; i < kK + 1; ++i) {
    const Result<AllocGrant> r = Alloc(c0);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status.ToString();
    ASSERT_TRUE(Free(c0, r.value.handle).ok()) << i;
  }
  const Result<AllocGrant> theirs = Alloc(c1);
  ASSERT_TRUE(theirs.ok()) << theirs.status.ToString();
  sim().Run();
  const Snapshot before = Snap();
  ExpectRefused(Free(c0, theirs.value.handle));
  sim().Run();
  EXPECT_TRUE(c0.fchain->Faulted());
  EXPECT_EQ(Snap(), before) << "the refused free changed nothing";
  ExpectUsable(c1, theirs.value, 0x77);
  // CN 1's chains keep working for more than their instances.
  ASSERT_TRUE(Free(c1, theirs.value.handle).ok());
  for (uint32_t i = 0; i < kK + 1; ++i) {
    const Result<AllocGrant> r = Alloc(c1);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status.ToString();
    ASSERT_TRUE(Free(c1, r.value.handle).ok()) << i;
  }
  EXPECT_FALSE(c1.fchain->Faulted());
}

// ---- Lanes: several frees inside one Free QP at once ----------------------------

// Frees on different lanes overlap: eight frees through four lanes take far
// less than eight frees one after another, and the queue ends with every
// entry exactly once.
TEST_F(FreeChainTest, LanesRunFreesSideBySide) {
  recycle_ = true;
  lanes_ = 4;
  Build(/*entries=*/16, /*cns=*/1, /*g=*/3, /*instances=*/16);
  Cn& cn = *cns_[0];
  std::vector<uint64_t> held;
  for (int i = 0; i < 9; ++i) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status.ToString();
    held.push_back(r.value.handle);
  }
  std::vector<Status> st;
  const Ps one = FreeAll(cn, {held.back()}, &st);
  ASSERT_TRUE(st[0].ok()) << st[0].ToString();
  held.pop_back();
  const Ps eight = FreeAll(cn, held, &st);
  for (size_t i = 0; i < st.size(); ++i) EXPECT_TRUE(st[i].ok()) << i << ": " << st[i].ToString();
  std::cout << "one free " << PsToUs(one) << " us; eight frees through 4 lanes " << PsToUs(eight)
            << " us\n";
  EXPECT_LT(eight, 4 * one) << "one after another would take about 8x";
  EXPECT_EQ(cn.fchain->frees_done(), 9u);
  for (uint32_t w = 0; w < 4; ++w) {
    EXPECT_GT(cn.fchain->unbind_qp(w)->counters().send_wrs_executed, 0u) << "lane " << w;
  }
  EXPECT_EQ(md_->LoadHead(), md_->LoadTail()) << "every claimed element was refilled";
  std::vector<uint64_t> in_queue;
  for (uint32_t i = 0; i < 16; ++i) in_queue.push_back(md_->LoadElement(i));
  std::sort(in_queue.begin(), in_queue.end());
  for (uint32_t e = 0; e < 16; ++e) {
    EXPECT_EQ(in_queue[e], md_->entry_addr(e)) << "each entry exactly once in the queue";
    ExpectUnbound(e);
    EXPECT_EQ(md_->LoadEntry(e).owner_id, kNoOwner);
  }
  EXPECT_FALSE(cn.fchain->Faulted());
}

// A refused free in the middle of frees in flight on other lanes: the frees
// before it (in request order) finish and are answered, the refused one gets
// no reply, the one behind it is flushed unrun, and the victim keeps its
// entry. The replies wait for their own instance's L5, so a later lane's
// ENABLE of R never answers the refused free.
TEST_F(FreeChainTest, ARefusedFreeAmongFreesInFlightIsTheOnlyOneRefused) {
  recycle_ = true;
  lanes_ = 4;
  Build(/*entries=*/16, /*cns=*/2, /*g=*/3, /*instances=*/16);
  Cn& attacker = *cns_[0];
  Cn& victim = *cns_[1];
  const Result<AllocGrant> theirs = Alloc(victim);
  ASSERT_TRUE(theirs.ok()) << theirs.status.ToString();
  std::vector<uint64_t> handles;
  for (int i = 0; i < 3; ++i) {
    const Result<AllocGrant> r = Alloc(attacker);
    ASSERT_TRUE(r.ok()) << r.status.ToString();
    handles.push_back(r.value.handle);
  }
  handles.insert(handles.begin() + 2, theirs.value.handle);  // request 2 of 4
  std::vector<Status> st;
  (void)FreeAll(attacker, handles, &st);
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
  ExpectRefused(st[2]);
  EXPECT_EQ(st[3].code(), Code::kLaneBroken) << st[3].ToString();
  EXPECT_EQ(attacker.fchain->frees_done(), 2u);
  const uint32_t ve = static_cast<uint32_t>((theirs.value.handle - md_->entry_addr(0)) /
                                            md_->layout().entry_stride);
  ExpectBoundTo(ve, victim, theirs.value);
  EXPECT_EQ(md_->LoadEntry(ve).owner_id, OwnerIdOfCn(1));
  ExpectUsable(victim, theirs.value, 0x5a);
}

// A free refused at U (its MW 2 was never bound) while the frees behind it
// pass F on other lanes and finish: their ENABLEs of R reach past the
// refused free's reply, which must still not be sent (R.wait: each reply
// waits for its own instance's L5). The refused free gets no reply; the two
// behind it did free their entries, and their replies, queued behind the
// refused one, are flushed.
TEST_F(FreeChainTest, ALaterLanesReplyNeverAnswersAFreeRefusedAtU) {
  recycle_ = true;
  lanes_ = 4;
  Build(/*entries=*/8, /*cns=*/1, /*g=*/3, /*instances=*/16);
  Cn& cn = *cns_[0];
  std::vector<uint64_t> handles;
  for (int i = 0; i < 3; ++i) {
    const Result<AllocGrant> r = Alloc(cn);
    ASSERT_TRUE(r.ok()) << r.status.ToString();
    handles.push_back(r.value.handle);
  }
  // A bad allocation request (no QP 0xabcdef): entry 3 is claimed and owned,
  // MW 0 bound to this CN's Free QP, MW 1 bound, MW 2 not.
  Result<AllocGrant> bad;
  cluster_->RunToCompletion(AllocInto(cn.alloc.get(), {cn.acc_mn[0]->qp_num(), 0xabcdef}, &bad));
  ASSERT_FALSE(bad.ok());
  sim().Run();
  ASSERT_EQ(Window(3, 2)->state_, SimMw::State::kFree);
  handles.insert(handles.begin() + 1, md_->entry_addr(3));  // request 1 of 4
  std::vector<Status> st;
  (void)FreeAll(cn, handles, &st);
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  ExpectRefused(st[1]);
  EXPECT_EQ(st[2].code(), Code::kLaneBroken) << st[2].ToString();
  EXPECT_EQ(st[3].code(), Code::kLaneBroken) << st[3].ToString();
  EXPECT_EQ(cn.fchain->unbind_qp(1)->state(), QpState::kErr) << "LOCAL_INV of unbound MW 2";
  EXPECT_EQ(cn.fchain->frees_done(), 3u) << "requests 0, 2 and 3 passed their owner checks";
  for (uint32_t e : {0u, 1u, 2u}) EXPECT_EQ(md_->LoadEntry(e).owner_id, kNoOwner) << e;
  EXPECT_EQ(md_->LoadEntry(3).owner_id, OwnerIdOfCn(0)) << "the refused free cleared nothing";
}

}  // namespace
}  // namespace dmb::sim::testing

// Protection rules, each asserted so that a wrong RNIC would fail it.
#include "fabric/sim/test_util.h"

namespace dmb::sim::testing {
namespace {

class ProtectionTest : public SimFixture {
 protected:
  void SetUp() override {
    mn_ = AddNode("mn");
    mn_pd_ = mn_->AllocPd();
    mn_buf_ = mn_->memory().Alloc(1 << 20);
    mn_mr_ = RegMr(mn_, mn_pd_, mn_buf_, 1 << 20);
    mn_cq_ = mn_->CreateCq(1024);
    for (int i = 0; i < 2; ++i) {
      Endpoint e;
      e.node = AddNode("cn" + std::to_string(i));
      e.pd = e.node->AllocPd();
      e.cq = e.node->CreateCq(1024);
      e.qp = MakeQp(e.node, e.pd, e.cq);
      cn_.push_back(e);
      buf_.push_back(e.node->memory().Alloc(1 << 16));
      mr_.push_back(RegMr(e.node, e.pd, buf_.back(), 1 << 16));
      mn_side_.push_back(MakeQp(mn_, mn_pd_, mn_cq_));
      cluster_->Connect(e.qp, mn_side_.back());
    }
  }

  // Binds a type-2 MW over [addr, addr+len) to MN QP `bound` (posted on `poster`).
  WorkCompletion BindType2(Mw* mw, Qp* poster, Qp* bound, uint64_t addr, uint64_t len,
                           uint32_t new_key, Mr* mr = nullptr,
                           uint32_t access = kAllAccess & ~kMwBind) {
    SendWr wr;
    wr.opcode = Opcode::kBindMw;
    wr.bind_mw_rkey = mw->rkey();
    wr.bind_new_rkey = (mw->rkey() & ~0xffu) | (new_key & 0xff);
    wr.bind_mr_lkey = (mr ? mr : mn_mr_)->lkey();
    wr.bind_addr = addr;
    wr.bind_length = len;
    wr.bind_access = access;
    wr.bind_qpn = bound ? bound->qp_num() : 0;
    return Exec(poster, mn_cq_, wr);
  }

  WorkCompletion CnRead(int cn, uint64_t raddr, uint32_t rkey, uint32_t len = 8) {
    return Exec(cn_[cn].qp, cn_[cn].cq, Read(buf_[cn], mr_[cn]->lkey(), len, raddr, rkey));
  }

  // Replaces CN `cn`'s errored connection by a fresh pair.
  void Reconnect(int cn) {
    cn_[cn].qp = MakeQp(cn_[cn].node, cn_[cn].pd, cn_[cn].cq);
    mn_side_[cn] = MakeQp(mn_, mn_pd_, mn_cq_);
    cluster_->Connect(cn_[cn].qp, mn_side_[cn]);
  }

  Node* mn_;
  Pd* mn_pd_;
  uint64_t mn_buf_;
  Mr* mn_mr_;
  Cq* mn_cq_;
  std::vector<Endpoint> cn_;
  std::vector<uint64_t> buf_;
  std::vector<Mr*> mr_;
  std::vector<Qp*> mn_side_;
};

TEST_F(ProtectionTest, Type2MwOnlyUsableThroughItsBoundQp) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(BindType2(mw, mn_side_[0], mn_side_[0], mn_buf_, 4096, 1).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(0, mn_buf_, mw->rkey()).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(1, mn_buf_, mw->rkey()).status, WcStatus::kRemAccessErr);
  EXPECT_EQ(cn_[1].qp->state(), QpState::kErr);
  EXPECT_EQ(mn_side_[1]->state(), QpState::kErr) << "the responder QP errors too";
  EXPECT_EQ(cn_[0].qp->state(), QpState::kRts) << "the owner is unaffected";
}

TEST_F(ProtectionTest, Type2BindQpnFieldAssignsTheWindowToAnotherQp) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  // Posted on CN0's MN QP, assigned to CN1's MN QP (OneSidedMW's Sep trick).
  ASSERT_EQ(BindType2(mw, mn_side_[0], mn_side_[1], mn_buf_, 4096, 1).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(1, mn_buf_, mw->rkey()).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(0, mn_buf_, mw->rkey()).status, WcStatus::kRemAccessErr);
}

TEST_F(ProtectionTest, Type1MwUsableFromAnyQpOfThePd) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType1);
  ASSERT_EQ(
      mn_side_[0]->BindMw(mw, 5, mn_mr_, mn_buf_, 4096, kRemoteRead, (mw->rkey() & ~0xffu) | 3), 0);
  WorkCompletion wc;
  cluster_->RunToCompletion(
      [](Cq* cq, WorkCompletion* o) -> Task<void> { *o = co_await cq->Next(); }(mn_cq_, &wc));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(mw->rkey() & 0xff, 3u);
  EXPECT_EQ(CnRead(0, mn_buf_, mw->rkey()).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(1, mn_buf_ + 8, mw->rkey()).status, WcStatus::kSuccess);
}

TEST_F(ProtectionTest, OldRkeyRefusedAfterRebindAndAfterInvalidate) {
  Mw* t1 = mn_->AllocMw(mn_pd_, MwType::kType1);
  ASSERT_EQ(
      mn_side_[0]->BindMw(t1, 1, mn_mr_, mn_buf_, 4096, kRemoteRead, (t1->rkey() & ~0xffu) | 1), 0);
  sim().Run();
  const uint32_t old_rkey = t1->rkey();
  ASSERT_EQ(mn_side_[0]->BindMw(t1, 2, mn_mr_, mn_buf_ + 4096, 4096, kRemoteRead,
                                (old_rkey & ~0xffu) | 2),
            0);
  sim().Run();
  WorkCompletion wcs[4];
  ASSERT_EQ(mn_cq_->Poll(wcs), 2);
  EXPECT_EQ(t1->rkey() >> 8, old_rkey >> 8) << "a rebind keeps the index";
  EXPECT_NE(t1->rkey(), old_rkey) << "and changes the key byte";
  EXPECT_EQ(CnRead(0, mn_buf_, old_rkey).status, WcStatus::kRemAccessErr);
  Reconnect(0);
  EXPECT_EQ(CnRead(0, mn_buf_ + 4096, t1->rkey()).status, WcStatus::kSuccess);

  Mw* t2 = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(BindType2(t2, mn_side_[0], nullptr, mn_buf_, 4096, 9).status, WcStatus::kSuccess);
  const uint32_t rkey2 = t2->rkey();
  EXPECT_EQ(CnRead(0, mn_buf_, rkey2).status, WcStatus::kSuccess);
  SendWr inv;
  inv.opcode = Opcode::kLocalInv;
  inv.invalidate_rkey = rkey2;
  ASSERT_EQ(Exec(mn_side_[0], mn_cq_, inv).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(0, mn_buf_, rkey2).status, WcStatus::kRemAccessErr);
}

TEST_F(ProtectionTest, BindFailsOutsideTheMrOrWithoutMwBindAccess) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  EXPECT_EQ(BindType2(mw, mn_side_[0], nullptr, mn_buf_ + (1 << 20) - 100, 4096, 1).status,
            WcStatus::kMwBindErr);
  EXPECT_EQ(mn_side_[0]->state(), QpState::kErr) << "a bind error errors the QP";
  Reconnect(0);
  const uint64_t plain = mn_->memory().Alloc(8192);
  Mr* no_bind = RegMr(mn_, mn_pd_, plain, 8192, kLocalWrite | kRemoteRead);
  EXPECT_EQ(BindType2(mw, mn_side_[0], nullptr, plain, 4096, 1, no_bind).status,
            WcStatus::kMwBindErr);
  Reconnect(0);
  // Remote write through a window needs LOCAL_WRITE on the MR.
  Mr* ro = RegMr(mn_, mn_pd_, plain, 8192, kRemoteRead | kMwBind);
  EXPECT_EQ(BindType2(mw, mn_side_[0], nullptr, plain, 4096, 1, ro, kRemoteWrite).status,
            WcStatus::kMwBindErr);
  Reconnect(0);
  EXPECT_EQ(BindType2(mw, mn_side_[0], nullptr, plain, 4096, 1, ro, kRemoteRead).status,
            WcStatus::kSuccess);
  EXPECT_EQ(BindType2(mw, mn_side_[0], nullptr, plain, 4096, 2, ro, kRemoteRead).status,
            WcStatus::kMwBindErr)
      << "a bound type-2 MW must be invalidated before a rebind";
}

TEST_F(ProtectionTest, WindowBoundsAndAccessFlagsAreEnforced) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(
      BindType2(mw, mn_side_[0], nullptr, mn_buf_ + 4096, 4096, 1, nullptr, kRemoteRead).status,
      WcStatus::kSuccess);
  EXPECT_EQ(CnRead(0, mn_buf_ + 4096 + 4088, mw->rkey(), 8).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(0, mn_buf_ + 4096 + 4089, mw->rkey(), 8).status, WcStatus::kRemAccessErr)
      << "the window, not the MR, bounds the access (rxe deviates here; the spec holds)";
  Reconnect(0);
  // Rebinding needs invalidation; instead use a fresh window on the new QP.
  Mw* ro = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(BindType2(ro, mn_side_[0], nullptr, mn_buf_, 4096, 1, nullptr, kRemoteRead).status,
            WcStatus::kSuccess);
  auto wc = Exec(cn_[0].qp, cn_[0].cq, Write(buf_[0], mr_[0]->lkey(), 8, mn_buf_, ro->rkey()));
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr) << "read-only window refuses WRITE";
}

TEST_F(ProtectionTest, PdMismatchAndForgedKeysAreRefused) {
  Pd* other_pd = mn_->AllocPd();
  const uint64_t b = mn_->memory().Alloc(4096);
  Mr* other = RegMr(mn_, other_pd, b, 4096);
  EXPECT_EQ(CnRead(0, b, other->rkey()).status, WcStatus::kRemAccessErr);
  Reconnect(0);
  EXPECT_EQ(CnRead(0, mn_buf_, mn_mr_->rkey() ^ 0x1).status, WcStatus::kRemAccessErr)
      << "right index, wrong key byte";
  Reconnect(0);
  EXPECT_EQ(CnRead(0, mn_buf_, 0x00ffff00u).status, WcStatus::kRemAccessErr) << "no such index";
}

TEST_F(ProtectionTest, ViolationErrorsQpAndFlushesLaterWrs) {
  // Three READs: the middle one is illegal. The first succeeds, the second
  // errors, the third (already in flight or not started) flushes.
  auto& e = cn_[0];
  ASSERT_EQ(e.qp->PostSend(Read(buf_[0], mr_[0]->lkey(), 8, mn_buf_, mn_mr_->rkey(), 1)), 0);
  ASSERT_EQ(e.qp->PostSend(Read(buf_[0], mr_[0]->lkey(), 8, mn_buf_, 0xdead00u, 2)), 0);
  ASSERT_EQ(e.qp->PostSend(Read(buf_[0], mr_[0]->lkey(), 8, mn_buf_, mn_mr_->rkey(), 3)), 0);
  ASSERT_EQ(e.qp->PostSend(Read(buf_[0], mr_[0]->lkey(), 8, mn_buf_, mn_mr_->rkey(), 4)), 0);
  sim().Run();
  WorkCompletion wcs[8];
  ASSERT_EQ(e.cq->Poll(wcs), 4);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(wcs[2].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wcs[3].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(e.qp->state(), QpState::kErr);
  EXPECT_GE(mn_side_[0]->counters().errors, 1u);
}

TEST_F(ProtectionTest, LocalKeyViolationIsLocalProtectionError) {
  auto wc = Exec(cn_[0].qp, cn_[0].cq,
                 Read(buf_[0] + (1 << 16) - 4, mr_[0]->lkey(), 8, mn_buf_, mn_mr_->rkey()));
  EXPECT_EQ(wc.status, WcStatus::kLocProtErr);
}

TEST_F(ProtectionTest, OnlyTheBoundQpMayInvalidateUnlessPrivileged) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(BindType2(mw, mn_side_[0], mn_side_[0], mn_buf_, 4096, 1).status, WcStatus::kSuccess);
  SendWr inv;
  inv.opcode = Opcode::kLocalInv;
  inv.invalidate_rkey = mw->rkey();
  EXPECT_EQ(Exec(mn_side_[1], mn_cq_, inv).status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(CnRead(0, mn_buf_, mw->rkey()).status, WcStatus::kSuccess) << "still bound";
  Cq* cq = mn_->CreateCq(16);
  Qp* priv = MakeQp(mn_, mn_pd_, cq, {.invalidate_any_qp = true});
  cluster_->Connect(priv, priv);
  EXPECT_EQ(Exec(priv, cq, inv).status, WcStatus::kSuccess);
  EXPECT_EQ(CnRead(0, mn_buf_, mw->rkey()).status, WcStatus::kRemAccessErr);
}

TEST_F(ProtectionTest, SendWithInvalidateUnbindsTheSendersWindow) {
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(BindType2(mw, mn_side_[0], mn_side_[0], mn_buf_, 4096, 1).status, WcStatus::kSuccess);
  RecvWr rr;
  rr.sg_list = {{mn_buf_ + 8192, 64, mn_mr_->lkey()}};
  ASSERT_EQ(mn_side_[0]->PostRecv(rr), 0);
  SendWr s;
  s.opcode = Opcode::kSendWithInv;
  s.invalidate_rkey = mw->rkey();
  s.sg_list = {{buf_[0], 8, mr_[0]->lkey()}};
  ASSERT_EQ(Exec(cn_[0].qp, cn_[0].cq, s).status, WcStatus::kSuccess);
  WorkCompletion rwc;
  ASSERT_EQ(mn_cq_->Poll({&rwc, 1}), 1);
  EXPECT_EQ(rwc.invalidated_rkey, mw->rkey());
  EXPECT_EQ(CnRead(0, mn_buf_, mw->rkey()).status, WcStatus::kRemAccessErr);
}

TEST_F(ProtectionTest, DeregisteringAnMrWithBoundWindowsFails) {
  const uint64_t b = mn_->memory().Alloc(8192);
  Mr* mr = RegMr(mn_, mn_pd_, b, 8192);
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  ASSERT_EQ(BindType2(mw, mn_side_[0], nullptr, b, 4096, 1, mr).status, WcStatus::kSuccess);
  EXPECT_THROW(cluster_->RunToCompletion(mn_->DeregMr(mr)), VerbsError);
}

TEST_F(ProtectionTest, ConcurrentAtomicsFromManyQpsAreAtomic) {
  // 8 CNs x 4 QPs; every QP does 50 FAA(+1) and 50 CAS-loop increments.
  const uint64_t faa_ctr = mn_buf_, cas_ctr = mn_buf_ + 64;
  struct Worker {
    Node* node;
    Qp* qp;
    Cq* cq;
    uint64_t buf;
    uint32_t lkey;
  };
  std::vector<Worker> ws;
  for (int c = 0; c < 8; ++c) {
    Node* n = AddNode("atomic-cn" + std::to_string(c));
    Pd* pd = n->AllocPd();
    const uint64_t b = n->memory().Alloc(4096);
    Mr* mr = RegMr(n, pd, b, 4096);
    for (int q = 0; q < 4; ++q) {
      Cq* cq = n->CreateCq(64);
      Qp* qp = MakeQp(n, pd, cq);
      cluster_->Connect(qp, MakeQp(mn_, mn_pd_, mn_cq_));
      ws.push_back({n, qp, cq, b + 64 * q, mr->lkey()});
    }
  }
  const uint32_t rkey = mn_mr_->rkey();
  uint64_t cas_retries = 0;
  for (const auto& w : ws) {
    rt().Spawn([](Worker w, uint64_t faa_ctr, uint64_t cas_ctr, uint32_t rkey,
                  uint64_t* retries) -> Task<void> {
      for (int i = 0; i < 50; ++i) {
        SendWr f = Read(w.buf, w.lkey, 8, faa_ctr, rkey);
        f.opcode = Opcode::kFetchAndAdd;
        f.compare_add = 1;
        EXPECT_EQ(w.qp->PostSend(f), 0);
        EXPECT_EQ((co_await w.cq->Next()).status, WcStatus::kSuccess);
        uint64_t expect = 0;
        for (;;) {
          SendWr c = Read(w.buf + 8, w.lkey, 8, cas_ctr, rkey);
          c.opcode = Opcode::kCmpAndSwp;
          c.compare_add = expect;
          c.swap = expect + 1;
          EXPECT_EQ(w.qp->PostSend(c), 0);
          EXPECT_EQ((co_await w.cq->Next()).status, WcStatus::kSuccess);
          const uint64_t old = w.node->memory().LoadU64(w.buf + 8);
          if (old == expect) break;
          ++*retries;
          expect = old;
        }
      }
    }(w, faa_ctr, cas_ctr, rkey, &cas_retries));
  }
  sim().Run();
  const uint64_t total = ws.size() * 50;
  EXPECT_EQ(mn_->memory().LoadU64(faa_ctr), total) << "no FAA lost";
  EXPECT_EQ(mn_->memory().LoadU64(cas_ctr), total) << "no CAS increment lost";
  EXPECT_GT(cas_retries, 0u) << "the CAS loops really contended";
  std::printf("[ counts ] %zu QPs, %llu FAA, %llu CAS increments, %llu CAS retries\n", ws.size(),
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(cas_retries));
}

}  // namespace
}  // namespace dmb::sim::testing

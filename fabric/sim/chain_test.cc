// Self-modifying WR chains: WRs that rewrite later WQEs in node memory, gated
// by WAIT and SEND_ENABLE, do what the rewritten WQEs say. No special cases:
// the RNIC simply reads each WQE when it executes it.
#include "fabric/sim/test_util.h"
#include "fabric/wqe_layout.h"

namespace dmb::sim::testing {
namespace {

class ChainTest : public SimFixture {
 protected:
  void SetUp() override {
    cn_ = AddNode("cn");
    mn_ = AddNode("mn");
    cn_pd_ = cn_->AllocPd();
    mn_pd_ = mn_->AllocPd();
    cn_buf_ = cn_->memory().Alloc(1 << 16);
    mn_buf_ = mn_->memory().Alloc(1 << 20);
    cn_mr_ = RegMr(cn_, cn_pd_, cn_buf_, 1 << 16);
    mn_mr_ = RegMr(mn_, mn_pd_, mn_buf_, 1 << 20);
    cn_cq_ = cn_->CreateCq(64);
    recv_cq_ = mn_->CreateCq(64, /*ignore_overrun=*/true);
    chain_cq_ = mn_->CreateCq(64, /*ignore_overrun=*/true);
    cn_qp_ = MakeQp(cn_, cn_pd_, cn_cq_);
    rq_qp_ = MakeQp(mn_, mn_pd_, recv_cq_, {.max_recv_sge = 4});
    cluster_->Connect(cn_qp_, rq_qp_);
    // A managed worker QP (looped back to itself) and a control QP that WAITs
    // and ENABLEs.
    worker_ = MakeQp(mn_, mn_pd_, chain_cq_, {.cross_channel = true, .manage_send = true});
    cluster_->Connect(worker_, worker_);
    ctrl_ = MakeQp(mn_, mn_pd_, chain_cq_, {.cross_channel = true});
    cluster_->Connect(ctrl_, ctrl_);
  }

  void WaitThenEnable(Cq* cq, uint64_t count, Qp* target, uint64_t index) {
    SendWr wait;
    wait.opcode = Opcode::kWait;
    wait.flags = 0;
    wait.wait_cq = cq->cq_num();
    wait.wait_count = count;
    ASSERT_EQ(ctrl_->PostSend(wait), 0);
    SendWr en;
    en.opcode = Opcode::kSendEnable;
    en.flags = 0;
    en.enable_qpn = target->qp_num();
    en.enable_index = index;
    ASSERT_EQ(ctrl_->PostSend(en), 0);
  }

  void CnSend(const void* payload, uint32_t len) {
    cn_->memory().Write(cn_buf_, payload, len);
    SendWr s;
    s.opcode = Opcode::kSend;
    s.sg_list = {{cn_buf_, len, cn_mr_->lkey()}};
    ASSERT_EQ(cn_qp_->PostSend(s), 0);
  }

  Node *cn_, *mn_;
  Pd *cn_pd_, *mn_pd_;
  uint64_t cn_buf_, mn_buf_;
  Mr *cn_mr_, *mn_mr_;
  Cq *cn_cq_, *recv_cq_, *chain_cq_;
  Qp *cn_qp_, *rq_qp_, *worker_, *ctrl_;
};

TEST_F(ChainTest, ManagedQpDoesNothingUntilEnabled) {
  mn_->memory().StoreU64(mn_buf_, 0x5555);
  ASSERT_EQ(worker_->PostSend(Write(mn_buf_, mn_mr_->lkey(), 8, mn_buf_ + 64, mn_mr_->rkey())), 0);
  sim().Run();
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 64), 0u) << "posted but not enabled";
  SendWr en;
  en.opcode = Opcode::kSendEnable;
  en.enable_qpn = worker_->qp_num();
  en.enable_index = 1;
  ASSERT_EQ(ctrl_->PostSend(en), 0);
  sim().Run();
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 64), 0x5555u);
}

TEST_F(ChainTest, WaitHoldsUntilTheCqReachesItsCount) {
  mn_->memory().StoreU64(mn_buf_, 0x77);
  ASSERT_EQ(worker_->PostSend(Write(mn_buf_, mn_mr_->lkey(), 8, mn_buf_ + 64, mn_mr_->rkey())), 0);
  WaitThenEnable(recv_cq_, 2, worker_, 1);
  for (int i = 0; i < 2; ++i) {
    RecvWr rr;
    rr.sg_list = {{mn_buf_ + 1024 + 64 * i, 64, mn_mr_->lkey()}};
    ASSERT_EQ(rq_qp_->PostRecv(rr), 0);
  }
  const uint64_t one = 1;
  CnSend(&one, 8);
  sim().Run();
  EXPECT_EQ(recv_cq_->total_completions(), 1u);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 64), 0u) << "WAIT(count=2) must still hold";
  CnSend(&one, 8);
  sim().Run();
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 64), 0x77u);
}

TEST_F(ChainTest, RecvScatterRewritesALaterWritesRemoteAddress) {
  const uint64_t placeholder = mn_buf_ + 0x1000, wanted = mn_buf_ + 0x2000;
  mn_->memory().StoreU64(mn_buf_, 0xfeedface);
  uint64_t widx = 0;
  ASSERT_EQ(
      worker_->PostSend(Write(mn_buf_, mn_mr_->lkey(), 8, placeholder, mn_mr_->rkey()), &widx), 0);
  // The RECV writes the CN's argument straight into the WRITE WQE's
  // remote_addr field (big-endian, as the WQE layout says).
  RecvWr rr;
  rr.sg_list = {{worker_->SendWqeAddr(widx) + WqeLayout::kRemoteAddr, 8, worker_->wq_lkey()}};
  ASSERT_EQ(rq_qp_->PostRecv(rr), 0);
  WaitThenEnable(recv_cq_, 1, worker_, widx + 1);
  uint8_t arg[8];
  StoreBe64(arg, wanted);
  CnSend(arg, 8);
  sim().Run();
  EXPECT_EQ(mn_->memory().LoadU64(wanted), 0xfeedfaceu) << "the rewritten address was used";
  EXPECT_EQ(mn_->memory().LoadU64(placeholder), 0u) << "the posted address was not";
}

TEST_F(ChainTest, RecvScatterCanRewriteTheEnableIndexItself) {
  // Two WRITEs pre-posted; the ENABLE is posted for index 1 but the CN's
  // argument rewrites it to 2 before it executes.
  mn_->memory().StoreU64(mn_buf_, 0xaa);
  ASSERT_EQ(worker_->PostSend(Write(mn_buf_, mn_mr_->lkey(), 8, mn_buf_ + 64, mn_mr_->rkey())), 0);
  ASSERT_EQ(worker_->PostSend(Write(mn_buf_, mn_mr_->lkey(), 8, mn_buf_ + 128, mn_mr_->rkey())), 0);
  const uint64_t wait_idx = ctrl_->next_send_index();
  WaitThenEnable(recv_cq_, 1, worker_, 1);
  RecvWr rr;
  rr.sg_list = {{ctrl_->SendWqeAddr(wait_idx + 1) + WqeLayout::kOperand0, 8, ctrl_->wq_lkey()}};
  ASSERT_EQ(rq_qp_->PostRecv(rr), 0);
  uint8_t arg[8];
  StoreBe64(arg, 2);
  CnSend(arg, 8);
  sim().Run();
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 64), 0xaau);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 128), 0xaau) << "index rewritten from 1 to 2";
}

TEST_F(ChainTest, ReadRewritesALaterBindMwsFields) {
  // An MW table entry (OneSidedMW style): chunk base, MW rkey, new rkey, all
  // big-endian so a READ can drop them straight into a BIND_MW WQE.
  Mw* mw = mn_->AllocMw(mn_pd_, MwType::kType2);
  const uint64_t chunk = mn_buf_ + 0x8000;
  const uint64_t entry = mn_buf_ + 0x100;
  uint8_t e[16];
  StoreBe64(e, chunk);
  StoreBe32(e + 8, mw->rkey());
  StoreBe32(e + 12, (mw->rkey() & ~0xffu) | 0x42);
  mn_->memory().Write(entry, e, 16);
  mn_->memory().StoreU64(chunk, 0xc0ffee);

  // Pre-posted BIND_MW with placeholder address and keys, bound to the MN QP
  // that serves the CN.
  SendWr bind;
  bind.opcode = Opcode::kBindMw;
  bind.bind_mr_lkey = mn_mr_->lkey();
  bind.bind_length = 4096;
  bind.bind_access = kRemoteRead | kRemoteWrite;
  bind.bind_qpn = rq_qp_->qp_num();
  uint64_t bidx = 0;
  ASSERT_EQ(worker_->PostSend(bind, &bidx), 0);

  // Loopback READ of the entry into the BIND WQE's remote_addr/rkey/aux.
  Cq* rd_cq = mn_->CreateCq(16, true);
  Qp* reader = MakeQp(mn_, mn_pd_, rd_cq);
  cluster_->Connect(reader, reader);
  SendWr rd = Read(worker_->SendWqeAddr(bidx) + WqeLayout::kRemoteAddr, worker_->wq_lkey(), 16,
                   entry, mn_mr_->rkey());
  WaitThenEnable(rd_cq, 1, worker_, bidx + 1);
  ASSERT_EQ(reader->PostSend(rd), 0);
  sim().Run();

  EXPECT_EQ(mw->rkey() & 0xff, 0x42u) << "bound with the key the READ supplied";
  auto wc = Exec(cn_qp_, cn_cq_, Read(cn_buf_, cn_mr_->lkey(), 8, chunk, mw->rkey()));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(cn_->memory().LoadU64(cn_buf_), 0xc0ffeeu) << "window sits where the READ said";
}

TEST_F(ChainTest, FenceOrdersAReadBeforeTheWqeItFeeds) {
  // Without WAIT: on one QP, READ a value into a later WRITE's remote_addr,
  // and FENCE the WRITE so it starts after the READ completed.
  Cq* cq = mn_->CreateCq(16);
  Qp* qp = MakeQp(mn_, mn_pd_, cq);
  cluster_->Connect(qp, qp);
  const uint64_t target = mn_buf_ + 0x3000;
  uint8_t be[8];
  StoreBe64(be, target);
  mn_->memory().Write(mn_buf_ + 0x200, be, 8);
  mn_->memory().StoreU64(mn_buf_, 0xbeef);
  const uint64_t ridx = qp->next_send_index();
  SendWr rd = Read(qp->SendWqeAddr(ridx + 1) + WqeLayout::kRemoteAddr, qp->wq_lkey(), 8,
                   mn_buf_ + 0x200, mn_mr_->rkey());
  rd.flags = 0;
  ASSERT_EQ(qp->PostSend(rd), 0);
  SendWr wr = Write(mn_buf_, mn_mr_->lkey(), 8, /*placeholder*/ mn_buf_ + 0x4000, mn_mr_->rkey());
  wr.flags = kSignaled | kFence;
  ASSERT_EQ(qp->PostSend(wr), 0);
  sim().Run();
  EXPECT_EQ(mn_->memory().LoadU64(target), 0xbeefu);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 0x4000), 0u);
}

}  // namespace
}  // namespace dmb::sim::testing

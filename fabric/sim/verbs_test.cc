// Data-path semantics of the sim backend: each opcode moves real bytes.
#include <cstring>

#include "fabric/sim/test_util.h"
#include "fabric/wqe_layout.h"

namespace dmb::sim::testing {
namespace {

class VerbsTest : public SimFixture {
 protected:
  void SetUp() override {
    cn_ = AddNode("cn");
    mn_ = AddNode("mn");
    cn_pd_ = cn_->AllocPd();
    mn_pd_ = mn_->AllocPd();
    cn_buf_ = cn_->memory().Alloc(1 << 20);
    mn_buf_ = mn_->memory().Alloc(1 << 20);
    cn_mr_ = RegMr(cn_, cn_pd_, cn_buf_, 1 << 20);
    mn_mr_ = RegMr(mn_, mn_pd_, mn_buf_, 1 << 20);
    cn_cq_ = cn_->CreateCq(256);
    mn_cq_ = mn_->CreateCq(256);
    cn_qp_ = MakeQp(cn_, cn_pd_, cn_cq_, {.max_send_sge = 4, .max_recv_sge = 4});
    mn_qp_ = MakeQp(mn_, mn_pd_, mn_cq_, {.max_send_sge = 4, .max_recv_sge = 4});
    cluster_->Connect(cn_qp_, mn_qp_);
  }

  Node *cn_, *mn_;
  Pd *cn_pd_, *mn_pd_;
  uint64_t cn_buf_, mn_buf_;
  Mr *cn_mr_, *mn_mr_;
  Cq *cn_cq_, *mn_cq_;
  Qp *cn_qp_, *mn_qp_;
};

TEST_F(VerbsTest, WriteThenReadMovesRealBytes) {
  const char msg[] = "disaggregated memory";
  cn_->memory().Write(cn_buf_, msg, sizeof msg);
  auto wc = Exec(cn_qp_, cn_cq_,
                 Write(cn_buf_, cn_mr_->lkey(), sizeof msg, mn_buf_ + 100, mn_mr_->rkey()));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  char got[sizeof msg] = {};
  mn_->memory().Read(mn_buf_ + 100, got, sizeof msg);
  EXPECT_STREQ(got, msg);

  wc = Exec(cn_qp_, cn_cq_,
            Read(cn_buf_ + 4096, cn_mr_->lkey(), sizeof msg, mn_buf_ + 100, mn_mr_->rkey(), 7));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.byte_len, sizeof msg);
  cn_->memory().Read(cn_buf_ + 4096, got, sizeof msg);
  EXPECT_STREQ(got, msg);
}

TEST_F(VerbsTest, ReadScattersIntoSeveralSges) {
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  mn_->memory().Write(mn_buf_, data, 8);
  SendWr wr = Read(0, 0, 0, mn_buf_, mn_mr_->rkey());
  // Reversed single-byte SGEs: the byte-swap trick of ODRP's EndianSwap.
  wr.sg_list.clear();
  for (int i = 0; i < 4; ++i) wr.sg_list.push_back({cn_buf_ + 3 - i, 1, cn_mr_->lkey()});
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, wr).status, WcStatus::kSuccess);
  uint8_t got[4];
  cn_->memory().Read(cn_buf_, got, 4);
  EXPECT_EQ(got[0], 4);
  EXPECT_EQ(got[3], 1);
}

TEST_F(VerbsTest, SendLandsInPostedRecvBuffers) {
  RecvWr rr;
  rr.wr_id = 42;
  rr.sg_list = {{mn_buf_, 4, mn_mr_->lkey()}, {mn_buf_ + 64, 60, mn_mr_->lkey()}};
  ASSERT_EQ(mn_qp_->PostRecv(rr), 0);
  const char msg[] = "hello, memory node";
  cn_->memory().Write(cn_buf_, msg, sizeof msg);
  SendWr wr;
  wr.opcode = Opcode::kSend;
  wr.sg_list = {{cn_buf_, sizeof msg, cn_mr_->lkey()}};
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, wr).status, WcStatus::kSuccess);
  WorkCompletion rwc;
  ASSERT_EQ(mn_cq_->Poll({&rwc, 1}), 1);
  EXPECT_EQ(rwc.wr_id, 42u);
  EXPECT_EQ(rwc.opcode, Opcode::kRecv);
  EXPECT_EQ(rwc.byte_len, sizeof msg);
  char got[sizeof msg] = {};
  mn_->memory().Read(mn_buf_, got, 4);
  mn_->memory().Read(mn_buf_ + 64, got + 4, sizeof msg - 4);
  EXPECT_STREQ(got, msg);
}

TEST_F(VerbsTest, SendWithoutRecvFailsWithRnrRetryExceeded) {
  SendWr wr;
  wr.opcode = Opcode::kSend;
  wr.sg_list = {{cn_buf_, 8, cn_mr_->lkey()}};
  auto wc = Exec(cn_qp_, cn_cq_, wr);
  EXPECT_EQ(wc.status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(cn_qp_->state(), QpState::kErr);
}

TEST_F(VerbsTest, WriteWithImmConsumesRecvAndCarriesImm) {
  RecvWr rr;
  rr.wr_id = 9;
  ASSERT_EQ(mn_qp_->PostRecv(rr), 0);
  SendWr wr = Write(cn_buf_, cn_mr_->lkey(), 16, mn_buf_, mn_mr_->rkey());
  wr.opcode = Opcode::kWriteWithImm;
  wr.imm_data = 0xabcd;
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, wr).status, WcStatus::kSuccess);
  WorkCompletion rwc;
  ASSERT_EQ(mn_cq_->Poll({&rwc, 1}), 1);
  EXPECT_TRUE(rwc.with_imm);
  EXPECT_EQ(rwc.imm_data, 0xabcdu);
  EXPECT_EQ(rwc.opcode, Opcode::kRecvRdmaWithImm);
}

TEST_F(VerbsTest, AtomicsReturnOldValueLittleEndian) {
  mn_->memory().StoreU64(mn_buf_, 100);
  SendWr faa = Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey());
  faa.opcode = Opcode::kFetchAndAdd;
  faa.compare_add = 5;
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, faa).status, WcStatus::kSuccess);
  EXPECT_EQ(cn_->memory().LoadU64(cn_buf_), 100u);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_), 105u);

  SendWr cas = faa;
  cas.opcode = Opcode::kCmpAndSwp;
  cas.compare_add = 104;  // wrong expectation: no swap
  cas.swap = 7;
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, cas).status, WcStatus::kSuccess);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_), 105u);
  cas.compare_add = 105;
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, cas).status, WcStatus::kSuccess);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_), 7u);
  EXPECT_EQ(cn_->memory().LoadU64(cn_buf_), 105u);
}

TEST_F(VerbsTest, MaskedFetchAndAddWrapsInsideItsField) {
  // Low 16-bit field at 0xfff8 + 8 wraps to 0 without carrying into bit 16.
  mn_->memory().StoreU64(mn_buf_, 0x0001'fff8);
  SendWr m = Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey());
  m.opcode = Opcode::kMaskedFetchAndAdd;
  m.compare_add = 8;
  m.swap = 1ull << 15;  // field boundary after bit 15
  ASSERT_EQ(Exec(cn_qp_, cn_cq_, m).status, WcStatus::kSuccess);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_), 0x0001'0000u);
}

TEST_F(VerbsTest, MisalignedAtomicIsInvalidRequest) {
  SendWr faa = Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_ + 4, mn_mr_->rkey());
  faa.opcode = Opcode::kFetchAndAdd;
  EXPECT_EQ(Exec(cn_qp_, cn_cq_, faa).status, WcStatus::kRemInvReqErr);
}

TEST_F(VerbsTest, LoopbackQpReadsItsOwnNode) {
  Cq* cq = mn_->CreateCq(16);
  Qp* a = MakeQp(mn_, mn_pd_, cq);
  Qp* b = MakeQp(mn_, mn_pd_, cq);
  cluster_->Connect(a, b);
  mn_->memory().StoreU64(mn_buf_ + 8, 0x1234);
  auto wc = Exec(a, cq, Read(mn_buf_ + 16, mn_mr_->lkey(), 8, mn_buf_ + 8, mn_mr_->rkey()));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 16), 0x1234u);
  // A QP connected to itself works too.
  Qp* self = MakeQp(mn_, mn_pd_, cq);
  cluster_->Connect(self, self);
  wc = Exec(self, cq, Read(mn_buf_ + 24, mn_mr_->lkey(), 8, mn_buf_ + 8, mn_mr_->rkey()));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_ + 24), 0x1234u);
}

TEST_F(VerbsTest, QpStateMachineRejectsIllegalTransitions) {
  Qp* qp = MakeQp(cn_, cn_pd_, cn_cq_);
  EXPECT_EQ(qp->state(), QpState::kReset);
  EXPECT_THROW(qp->Modify(QpState::kRts), VerbsError);
  EXPECT_THROW(qp->Modify(QpState::kRtr, {mn_->id(), mn_qp_->qp_num()}), VerbsError);
  qp->Modify(QpState::kInit);
  EXPECT_THROW(qp->Modify(QpState::kRtr, {mn_->id(), 9999}), VerbsError);
  SendWr wr = Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey());
  EXPECT_EQ(qp->PostSend(wr), EINVAL) << "sending needs RTS";
  qp->Modify(QpState::kRtr, {mn_->id(), mn_qp_->qp_num()});
  EXPECT_EQ(qp->PostSend(wr), EINVAL);
  qp->Modify(QpState::kRts);
  EXPECT_EQ(qp->state(), QpState::kRts);
  qp->Modify(QpState::kErr);
  EXPECT_THROW(qp->Modify(QpState::kRts), VerbsError);
  qp->Modify(QpState::kReset);
  EXPECT_EQ(qp->state(), QpState::kReset);
  EXPECT_THROW(qp->Modify(QpState::kErr), VerbsError) << "hardware refuses RESET->ERR";
}

TEST_F(VerbsTest, PostingToAnErroredQpFlushes) {
  cn_qp_->Modify(QpState::kErr);
  auto wc = Exec(cn_qp_, cn_cq_, Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey()));
  EXPECT_EQ(wc.status, WcStatus::kWrFlushErr);
}

TEST_F(VerbsTest, FullSendQueueReturnsEnomem) {
  Qp* qp = MakeQp(cn_, cn_pd_, cn_cq_, {.max_send_wr = 4});
  Qp* peer = MakeQp(mn_, mn_pd_, mn_cq_);
  cluster_->Connect(qp, peer);
  SendWr wr = Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(qp->PostSend(wr), 0);
  EXPECT_EQ(qp->PostSend(wr), ENOMEM);
  sim().Run();
  WorkCompletion wcs[8];
  EXPECT_EQ(cn_cq_->Poll(wcs), 4);
  EXPECT_EQ(qp->PostSend(wr), 0) << "slots come back once completions are delivered";
}

TEST_F(VerbsTest, UnsignaledWrsProduceNoCompletionUnlessTheyFail) {
  SendWr wr = Write(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey(), 1);
  wr.flags = 0;
  ASSERT_EQ(cn_qp_->PostSend(wr), 0);
  wr.flags = kSignaled;
  wr.wr_id = 2;
  auto wc = Exec(cn_qp_, cn_cq_, wr);
  EXPECT_EQ(wc.wr_id, 2u);
  WorkCompletion more;
  EXPECT_EQ(cn_cq_->Poll({&more, 1}), 0);
}

// Two WRs in flight on one QP, their awaiters registered in the other
// order: NextFor hands each its own completion (Next would give the first
// awaiter the first completion, whoever posted it).
TEST_F(VerbsTest, NextForRoutesEachCompletionToTheAwaiterOfItsWr) {
  ASSERT_EQ(cn_qp_->PostSend(Write(cn_buf_, cn_mr_->lkey(), 64, mn_buf_, mn_mr_->rkey(), 1)), 0);
  ASSERT_EQ(cn_qp_->PostSend(Read(cn_buf_ + 64, cn_mr_->lkey(), 64, mn_buf_, mn_mr_->rkey(), 2)),
            0);
  std::vector<uint64_t> order;  // (awaited wr_id, got wr_id) as they resume
  auto await = [](Cq* cq, uint64_t wr_id, std::vector<uint64_t>* order) -> Task<void> {
    const WorkCompletion wc = co_await cq->NextFor(wr_id);
    order->push_back(wr_id * 10 + wc.wr_id);
  };
  sim().Spawn(await(cn_cq_, 2, &order));
  sim().Spawn(await(cn_cq_, 1, &order));
  sim().Run();
  EXPECT_EQ(order, (std::vector<uint64_t>{11, 22}));
  // A completion nobody awaited stays queued for a later NextFor.
  ASSERT_EQ(cn_qp_->PostSend(Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey(), 3)), 0);
  sim().Run();
  sim().Spawn(await(cn_cq_, 3, &order));
  sim().Run();
  EXPECT_EQ(order.back(), 33u);
}

TEST_F(VerbsTest, SendQueueLivesInNodeMemoryWithDocumentedLayout) {
  SendWr wr = Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_ + 8, mn_mr_->rkey(), 77);
  uint64_t idx = 0;
  ASSERT_EQ(cn_qp_->PostSend(wr, &idx), 0);
  uint8_t wqe[64];
  cn_->memory().Read(cn_qp_->SendWqeAddr(idx), wqe, 64);
  EXPECT_EQ(wqe[WqeLayout::kOpcode], static_cast<uint8_t>(Opcode::kRead));
  EXPECT_EQ(LoadBe64(wqe + WqeLayout::kWrId), 77u);
  EXPECT_EQ(LoadBe64(wqe + WqeLayout::kRemoteAddr), mn_buf_ + 8);
  EXPECT_EQ(LoadBe32(wqe + WqeLayout::kRkey), mn_mr_->rkey());
  EXPECT_EQ(LoadBe64(wqe + WqeLayout::SegAddr(0)), cn_buf_);
  sim().Run();
}

}  // namespace
}  // namespace dmb::sim::testing

namespace dmb::sim::testing {
namespace {

// A simulated RNIC without a capability refuses what needs it, as a real one
// does (DeviceCaps; `dmbench devices` shows them for real devices).
TEST(SimCaps, MissingCapabilitiesAreRefused) {
  SimCluster c(1);
  NodeConfig cfg;
  cfg.name = "plain";
  cfg.memory_bytes = 1 << 20;
  cfg.caps.mw_type2 = false;
  cfg.caps.cross_channel = false;
  cfg.caps.qpn_in_bind = false;
  Node* n = c.AddNode(cfg);
  Pd* pd = n->AllocPd();
  EXPECT_EQ(n->caps().mw_type2, false);
  EXPECT_THROW(n->AllocMw(pd, MwType::kType2), VerbsError);
  EXPECT_NE(n->AllocMw(pd, MwType::kType1), nullptr);
  Cq* cq = n->CreateCq(16);
  QpInitAttr a;
  a.pd = pd;
  a.send_cq = a.recv_cq = cq;
  a.cross_channel = true;
  EXPECT_THROW(n->CreateQp(a), VerbsError);
  a.cross_channel = false;
  Qp* x = n->CreateQp(a);
  Qp* y = n->CreateQp(a);
  c.Connect(x, y);
  SendWr bind;
  bind.opcode = Opcode::kBindMw;
  bind.bind_qpn = y->qp_num();  // another QP: needs qpn_in_bind
  EXPECT_EQ(x->PostSend(bind), EINVAL);
  EXPECT_EQ(MissingCaps(n->caps(), {"mw_type1", "mw_type2", "cross_channel"}),
            (std::vector<std::string>{"mw_type2", "cross_channel"}));
  EXPECT_THROW(MissingCaps(n->caps(), {"warp_drive"}), std::invalid_argument);
  try {
    RequireCaps(*n, {"cross_channel"}, "onesided_mw");
    FAIL() << "no error";
  } catch (const VerbsError& e) {
    EXPECT_NE(std::string(e.what()).find("onesided_mw needs cross_channel"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'plain'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dmb::sim::testing

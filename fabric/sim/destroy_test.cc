// Node::DestroyQp / DestroyCq on the sim backend: a destroyed QP gives its
// work queue rings back to node memory, its outstanding WRs change nothing
// and complete nowhere, and nobody answers for it any more.
#include <cerrno>
#include <vector>

#include "fabric/sim/test_util.h"

namespace dmb::sim::testing {
namespace {

class DestroyTest : public SimFixture {
 protected:
  void SetUp() override {
    cn_ = AddNode("cn");
    mn_ = AddNode("mn");
    cn_pd_ = cn_->AllocPd();
    mn_pd_ = mn_->AllocPd();
    cn_buf_ = cn_->memory().Alloc(1 << 16);
    mn_buf_ = mn_->memory().Alloc(1 << 16);
    cn_mr_ = RegMr(cn_, cn_pd_, cn_buf_, 1 << 16);
    mn_mr_ = RegMr(mn_, mn_pd_, mn_buf_, 1 << 16);
    cn_cq_ = cn_->CreateCq(64);
    mn_cq_ = mn_->CreateCq(64);
    cn_qp_ = MakeQp(cn_, cn_pd_, cn_cq_);
    mn_qp_ = MakeQp(mn_, mn_pd_, mn_cq_);
    cluster_->Connect(cn_qp_, mn_qp_);
  }
  SimNode* Sim(Node* n) { return static_cast<SimNode*>(n); }
  void RunAll() { sim().Run(); }

  Node *cn_, *mn_;
  Pd *cn_pd_, *mn_pd_;
  uint64_t cn_buf_, mn_buf_;
  Mr *cn_mr_, *mn_mr_;
  Cq *cn_cq_, *mn_cq_;
  Qp *cn_qp_, *mn_qp_;
};

TEST_F(DestroyTest, RingsGoBackToNodeMemoryAndTheNextQpGetsThemZeroed) {
  const uint64_t before = mn_->memory().in_use_bytes();
  Qp* qp = MakeQp(mn_, mn_pd_, mn_cq_, {.max_send_wr = 256, .max_recv_wr = 256});
  const uint64_t ring = qp->SendWqeAddr(0);
  const uint32_t qpn = qp->qp_num();
  EXPECT_GT(mn_->memory().in_use_bytes(), before + 256 * qp->send_wqe_stride());
  cluster_->Connect(qp, qp);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(qp->PostSend(SendWr{.opcode = Opcode::kNop}), 0);
  mn_->DestroyQp(qp);
  EXPECT_EQ(mn_->memory().in_use_bytes(), before);
  EXPECT_EQ(mn_->QpByNum(qpn), nullptr);
  Qp* next = MakeQp(mn_, mn_pd_, mn_cq_, {.max_send_wr = 256, .max_recv_wr = 256});
  EXPECT_EQ(next->SendWqeAddr(0), ring) << "the freed rings are reused";
  std::vector<uint8_t> wqes(8 * next->send_wqe_stride(), 1);
  mn_->memory().Read(ring, wqes.data(), wqes.size());
  EXPECT_EQ(wqes, std::vector<uint8_t>(wqes.size(), 0)) << "no stale WQE survives";
  EXPECT_THROW(mn_->DestroyQp(cn_qp_), VerbsError) << "another node's QP";
}

TEST_F(DestroyTest, WrsInFlightChangeNothingAndCompleteNowhere) {
  cn_->memory().Fill(cn_buf_, 0x5A, 64);
  mn_->memory().Fill(mn_buf_, 0x11, 64);
  ASSERT_EQ(cn_qp_->PostSend(Write(cn_buf_, cn_mr_->lkey(), 64, mn_buf_, mn_mr_->rkey(), 1)), 0);
  ASSERT_EQ(cn_qp_->PostSend(Read(cn_buf_ + 4096, cn_mr_->lkey(), 64, mn_buf_, mn_mr_->rkey(), 2)),
            0);
  // Let both start (the WRITE on the wire, the READ's response not back),
  // then destroy the requester.
  while (cn_qp_->counters().send_wrs_executed < 2) sim().RunUntil(sim().now() + NsToPs(10));
  ASSERT_EQ(mn_qp_->counters().requests_served, 0u);
  cn_->DestroyQp(cn_qp_);
  RunAll();
  WorkCompletion wc[4];
  EXPECT_EQ(cn_cq_->Poll(wc), 0) << "a destroyed QP completes nothing";
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_), 0x1111111111111111ull) << "the WRITE was dropped";
  EXPECT_EQ(cn_->memory().LoadU64(cn_buf_ + 4096), 0u) << "the READ scattered nothing";
  EXPECT_EQ(Sim(cn_)->destroyed_qps_pending(), 0u) << "deleted once its events ran";
}

TEST_F(DestroyTest, RequestsToADestroyedQpGetNoAnswer) {
  mn_->DestroyQp(mn_qp_);
  auto wc = Exec(cn_qp_, cn_cq_, Write(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey()));
  EXPECT_EQ(wc.status, WcStatus::kRetryExcErr);
  EXPECT_EQ(mn_->memory().LoadU64(mn_buf_), 0u);
}

TEST_F(DestroyTest, CqGoesOnlyAfterItsQpsAndWaitsNamingItFail) {
  try {
    mn_->DestroyCq(mn_cq_);
    FAIL() << "a CQ in use was destroyed";
  } catch (const VerbsError& e) {
    EXPECT_EQ(e.err(), EBUSY);
  }
  const uint32_t num = mn_cq_->cq_num();
  mn_->DestroyQp(mn_qp_);
  mn_->DestroyCq(mn_cq_);
  EXPECT_THROW(mn_->DestroyCq(cn_cq_), VerbsError) << "another node's CQ";
  Cq* cq = mn_->CreateCq(16);
  Qp* ctrl = MakeQp(mn_, mn_pd_, cq, {.cross_channel = true});
  cluster_->Connect(ctrl, ctrl);
  SendWr wait;
  wait.opcode = Opcode::kWait;
  wait.wait_cq = num;
  wait.wait_count = 0;
  EXPECT_EQ(Exec(ctrl, cq, wait).status, WcStatus::kLocQpOpErr);
}

// Coroutines destroyed while they await a CQ (a runtime shut down with
// requests in flight, as a testbed's teardown does) leave its waiters: the
// CQ can then be destroyed (the onesided_mw swap runs that ended with an allocation in flight threw
// "cq is still used ... or awaited" from ~AllocClient before).
TEST_F(DestroyTest, ACoroutineDestroyedWhileAwaitingACqLeavesItsWaiters) {
  Cq* cq = cn_->CreateCq(8);
  int resumed = 0;
  auto waiter = [](Cq* c, int* r) -> Task<void> {
    (void)co_await c->Next();
    ++*r;
  };
  sim().Spawn(waiter(cq, &resumed));
  sim().Spawn(waiter(cq, &resumed));
  RunAll();  // both suspend in Next()
  EXPECT_THROW(cn_->DestroyCq(cq), VerbsError) << "awaited";
  sim().Shutdown();  // destroys both suspended tasks
  EXPECT_NO_THROW(cn_->DestroyCq(cq));
  EXPECT_EQ(resumed, 0);
  // Another CQ, awaited after the shutdown, still hands its completion over.
  Cq* kept = cn_->CreateCq(8);
  Qp* loop = MakeQp(cn_, cn_pd_, kept);
  cluster_->Connect(loop, loop);
  sim().Spawn(waiter(kept, &resumed));
  RunAll();
  ASSERT_EQ(loop->PostSend(SendWr{.opcode = Opcode::kNop, .flags = kSignaled}), 0);
  RunAll();
  EXPECT_EQ(resumed, 1);
}

TEST_F(DestroyTest, CreateDestroyCyclesKeepNodeMemoryFlat) {
  uint64_t in_use = 0, top = 0;
  for (int i = 0; i < 2000; ++i) {
    Cq* cq = mn_->CreateCq(16, true);
    Qp* a = MakeQp(mn_, mn_pd_, cq, {.max_send_wr = 64, .cross_channel = true});
    Qp* b = MakeQp(mn_, mn_pd_, cq, {.max_send_wr = 1024, .max_recv_wr = 16});
    cluster_->Connect(a, a);
    ASSERT_EQ(a->PostSend(Write(mn_buf_, mn_mr_->lkey(), 8, mn_buf_ + 64, mn_mr_->rkey())), 0);
    if (i % 2) RunAll();
    mn_->DestroyQp(b);
    mn_->DestroyQp(a);
    RunAll();
    mn_->DestroyCq(cq);
    if (i == 0) {
      in_use = mn_->memory().in_use_bytes();
      top = Sim(mn_)->mem().top();
    }
    ASSERT_EQ(mn_->memory().in_use_bytes(), in_use) << "cycle " << i;
    ASSERT_EQ(Sim(mn_)->mem().top(), top) << "cycle " << i;
  }
  EXPECT_EQ(Sim(mn_)->destroyed_qps_pending(), 0u);
}

}  // namespace
}  // namespace dmb::sim::testing

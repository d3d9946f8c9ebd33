// Timing, determinism, observability and fault hooks of the sim backend.
#include "fabric/sim/test_util.h"

namespace dmb::sim::testing {
namespace {

class TimingTest : public SimFixture {
 protected:
  explicit TimingTest(uint64_t seed = 1) : SimFixture(seed) {}
  void SetUp() override {
    cn_ = AddNode("cn");
    mn_ = AddNode("mn");
    cn_pd_ = cn_->AllocPd();
    mn_pd_ = mn_->AllocPd();
    cn_buf_ = cn_->memory().Alloc(1 << 20);
    mn_buf_ = mn_->memory().Alloc(1 << 20);
    cn_mr_ = RegMr(cn_, cn_pd_, cn_buf_, 1 << 20);
    mn_mr_ = RegMr(mn_, mn_pd_, mn_buf_, 1 << 20);
    cn_cq_ = cn_->CreateCq(64);
    mn_cq_ = mn_->CreateCq(64);
    cn_qp_ = MakeQp(cn_, cn_pd_, cn_cq_);
    mn_qp_ = MakeQp(mn_, mn_pd_, mn_cq_);
    cluster_->Connect(cn_qp_, mn_qp_);
  }
  // Latency of one READ as a CN thread sees it (post -> completion seen).
  double ReadLatencyUs(uint32_t bytes) {
    const Ps t0 = sim().now();
    auto wc = Exec(cn_qp_, cn_cq_, Read(cn_buf_, cn_mr_->lkey(), bytes, mn_buf_, mn_mr_->rkey()));
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    return PsToUs(sim().now() - t0);
  }

  Node *cn_, *mn_;
  Pd *cn_pd_, *mn_pd_;
  uint64_t cn_buf_, mn_buf_;
  Mr *cn_mr_, *mn_mr_;
  Cq *cn_cq_, *mn_cq_;
  Qp *cn_qp_, *mn_qp_;
};

TEST_F(TimingTest, FourKbReadTakesAboutTwoPointNineMicroseconds) {
  const double us = ReadLatencyUs(4096);
  EXPECT_NEAR(us, 2.9, 0.29) << "ODRP Fig 11: 2.9 us";
  EXPECT_LT(ReadLatencyUs(64), us) << "smaller transfers are faster";
  EXPECT_GT(ReadLatencyUs(65536), us + 4.0) << "64 KB pays ~5 us of serialization";
}

TEST_F(TimingTest, OffloadedQpsSlowOtherQpsDown) {
  const double base = ReadLatencyUs(4096);
  // 96 cross-channel MN QPs connected to the CN (the default reading charges
  // only QPs connected to another node, as the calibration bench's are).
  Cq* cq = mn_->CreateCq(8, true);
  Cq* peer_cq = cn_->CreateCq(8, true);
  for (int i = 0; i < 96; ++i) {
    Qp* q = MakeQp(mn_, mn_pd_, cq, {.cross_channel = true});
    cluster_->Connect(q, MakeQp(cn_, cn_pd_, peer_cq));
  }
  const double loaded = ReadLatencyUs(4096);
  EXPECT_NEAR(loaded / base, 1.126, 0.02) << "OneSidedMW 3.2: +12.6% at 96 QPs";
}

TEST_F(TimingTest, MrRegistrationChargesTheRegisteringCpu) {
  const Ps t0 = sim().now();
  const Ps busy0 = mn_->cpu().busy_ps();
  const uint64_t a = mn_->memory().Alloc(1 << 20, 4096);
  RegMr(mn_, mn_pd_, a, 1 << 20);
  const double us = PsToUs(sim().now() - t0);
  EXPECT_NEAR(us, 600, 60) << "ODRP: 1 MB registration ~600 us";
  EXPECT_EQ(mn_->cpu().busy_ps() - busy0, sim().now() - t0);
  bool found = false;
  for (auto& [name, ps] : mn_->cpu().BusyByCost()) found |= name == "verbs.mr_reg_page_4k";
  EXPECT_TRUE(found);
}

TEST_F(TimingTest, QpCountersCountWorkAndErrors) {
  ReadLatencyUs(64);
  ReadLatencyUs(64);
  EXPECT_EQ(cn_qp_->counters().send_wrs_executed, 2u);
  EXPECT_EQ(mn_qp_->counters().requests_served, 2u);
  EXPECT_EQ(mn_qp_->counters().errors, 0u);
  Exec(cn_qp_, cn_cq_, Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, 0xbad00));
  EXPECT_EQ(mn_qp_->counters().errors, 1u);
}

TEST_F(TimingTest, CrashedPeerMeansRetryExceededAfterTheTimeout) {
  cluster_->CrashNodeAt(mn_, sim().now() + 1);
  sim().RunUntil(sim().now() + 2);
  const Ps t0 = sim().now();
  auto wc = Exec(cn_qp_, cn_cq_, Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey()));
  EXPECT_EQ(wc.status, WcStatus::kRetryExcErr);
  EXPECT_GE(sim().now() - t0, cluster_->timing().retry_timeout);
  EXPECT_EQ(cn_qp_->state(), QpState::kErr);
}

TEST_F(TimingTest, FailQpHookFlushesOutstandingWork) {
  ASSERT_EQ(cn_qp_->PostSend(Read(cn_buf_, cn_mr_->lkey(), 8, mn_buf_, mn_mr_->rkey())), 0);
  cluster_->FailQp(cn_qp_);
  sim().Run();
  WorkCompletion wc;
  ASSERT_EQ(cn_cq_->Poll({&wc, 1}), 1);
  EXPECT_EQ(wc.status, WcStatus::kWrFlushErr);
}

// A randomized multi-QP workload; returns the trace hash and the final bytes.
std::pair<uint64_t, uint64_t> RandomWorkload(uint64_t seed) {
  SimCluster cl(seed);
  NodeConfig c;
  c.memory_bytes = 16 << 20;
  Node* mn = cl.AddNode(c);
  Pd* mpd = mn->AllocPd();
  const uint64_t mbuf = mn->memory().Alloc(1 << 20);
  Mr* mmr = nullptr;
  cl.RunToCompletion([](Node* n, Pd* pd, uint64_t b, Mr** o) -> Task<void> {
    *o = co_await n->RegMr(pd, b, 1 << 20, kAllAccess);
  }(mn, mpd, mbuf, &mmr));
  Cq* mcq = mn->CreateCq(1024);
  for (int i = 0; i < 4; ++i) {
    Node* cn = cl.AddNode(c);
    Pd* pd = cn->AllocPd();
    const uint64_t b = cn->memory().Alloc(1 << 16);
    Mr* mr = nullptr;
    cl.RunToCompletion([](Node* n, Pd* pd, uint64_t b, Mr** o) -> Task<void> {
      *o = co_await n->RegMr(pd, b, 1 << 16, kAllAccess);
    }(cn, pd, b, &mr));
    Cq* cq = cn->CreateCq(64);
    QpInitAttr a;
    a.pd = pd;
    a.send_cq = a.recv_cq = cq;
    Qp* qp = cn->CreateQp(a);
    QpInitAttr ma;
    ma.pd = mpd;
    ma.send_cq = ma.recv_cq = mcq;
    cl.Connect(qp, mn->CreateQp(ma));
    cl.runtime().Spawn([](Qp* qp, Cq* cq, uint64_t b, uint32_t lkey, uint64_t mbuf, uint32_t rkey,
                          Rng rng) -> Task<void> {
      for (int k = 0; k < 200; ++k) {
        SendWr wr;
        wr.opcode = rng.Uniform(2) ? Opcode::kWrite : Opcode::kFetchAndAdd;
        const uint32_t len =
            wr.opcode == Opcode::kWrite ? 8 + 8 * static_cast<uint32_t>(rng.Uniform(64)) : 8;
        wr.sg_list = {{b, len, lkey}};
        wr.remote_addr = mbuf + 8 * rng.Uniform(1000);
        wr.rkey = rkey;
        wr.compare_add = rng.Next() & 0xff;
        EXPECT_EQ(qp->PostSend(wr), 0);
        co_await cq->Next();
      }
    }(qp, cq, b, mr->lkey(), mbuf, mmr->rkey(), cl.sim().MakeRng("cn" + std::to_string(i))));
  }
  cl.sim().Run();
  uint64_t digest = 0;
  for (uint64_t off = 0; off < 8000; off += 8)
    digest = digest * 31 + mn->memory().LoadU64(mbuf + off);
  return {cl.sim().trace_hash(), digest};
}

// The two readings of the offload penalty ([OSMW] §3.2; profile_cx5.cc).
// A bed: one CN, one MN, `qps` CN QPs each with `depth` 64 B READs in flight,
// and `offloaded` cross-channel MN QPs, looped back or facing an idle node.
struct OffloadBed {
  double read_us = 0;   // one 4 KB READ, nothing else running
  double burst_us = 0;  // qps x depth 64 B READs, all posted at once
  int all = 0, cn_facing = 0;
};

OffloadBed RunOffloadBed(const std::string& profile, int offloaded, bool loopback) {
  SimCluster cl(1, Profile::ByName(profile));
  auto node = [&](const char* name) {
    NodeConfig c;
    c.name = name;
    c.memory_bytes = 64ull << 20;
    return cl.AddNode(c);
  };
  Node *cn = node("cn"), *mn = node("mn"), *idle = node("idle");
  Pd *cpd = cn->AllocPd(), *mpd = mn->AllocPd(), *ipd = idle->AllocPd();
  const uint64_t cb = cn->memory().Alloc(1 << 20), mb = mn->memory().Alloc(1 << 20);
  Mr *cmr = nullptr, *mmr = nullptr;
  cl.RunToCompletion([](Node* n, Pd* p, uint64_t a, Mr** o) -> Task<void> {
    *o = co_await n->RegMr(p, a, 1 << 20, kAllAccess);
  }(cn, cpd, cb, &cmr));
  cl.RunToCompletion([](Node* n, Pd* p, uint64_t a, Mr** o) -> Task<void> {
    *o = co_await n->RegMr(p, a, 1 << 20, kAllAccess);
  }(mn, mpd, mb, &mmr));
  Cq *mcq = mn->CreateCq(8, true), *icq = idle->CreateCq(8, true);
  for (int i = 0; i < offloaded; ++i) {
    Qp* q = mn->CreateQp({.pd = mpd, .send_cq = mcq, .recv_cq = mcq, .cross_channel = true});
    cl.Connect(q, loopback ? q : idle->CreateQp({.pd = ipd, .send_cq = icq, .recv_cq = icq}));
  }
  constexpr int kQps = 16, kDepth = 8;
  std::vector<std::pair<Qp*, Cq*>> lanes;
  for (int i = 0; i < kQps; ++i) {
    Cq* cq = cn->CreateCq(kDepth + 1);
    Qp* qp = cn->CreateQp({.pd = cpd, .send_cq = cq, .recv_cq = cq, .max_send_wr = kDepth});
    cl.Connect(qp, mn->CreateQp({.pd = mpd, .send_cq = mcq, .recv_cq = mcq}));
    lanes.push_back({qp, cq});
  }
  OffloadBed out;
  auto read = [&](uint32_t len) {
    SendWr wr;
    wr.opcode = Opcode::kRead;
    wr.sg_list = {{cb, len, cmr->lkey()}};
    wr.remote_addr = mb;
    wr.rkey = mmr->rkey();
    return wr;
  };
  Ps t0 = cl.sim().now();
  EXPECT_EQ(lanes[0].first->PostSend(read(4096)), 0);
  cl.RunToCompletion([](Cq* cq) -> Task<void> { (void)co_await cq->Next(); }(lanes[0].second));
  out.read_us = PsToUs(cl.sim().now() - t0);
  t0 = cl.sim().now();
  for (auto [qp, cq] : lanes) {
    for (int d = 0; d < kDepth; ++d) EXPECT_EQ(qp->PostSend(read(64)), 0);
  }
  for (auto [qp, cq] : lanes) {
    cl.RunToCompletion([](Cq* cq) -> Task<void> {
      for (int d = 0; d < kDepth; ++d) (void)co_await cq->Next();
    }(cq));
  }
  out.burst_us = PsToUs(cl.sim().now() - t0);
  out.all = static_cast<SimNode*>(mn)->offload_qps_all();
  out.cn_facing = static_cast<SimNode*>(mn)->offload_qps_cn_facing();
  return out;
}

TEST(OffloadReadings, ByDefaultOnlyQpsConnectedToAnotherNodeCarryThePenalty) {
  const OffloadBed none = RunOffloadBed("cx5", 0, true);
  const OffloadBed loop_all = RunOffloadBed("cx5+all_cross_channel", 96, true);
  const OffloadBed loop = RunOffloadBed("cx5", 96, true);
  const OffloadBed facing = RunOffloadBed("cx5", 96, false);
  EXPECT_EQ(loop.all, 96);
  EXPECT_EQ(loop.cn_facing, 0);
  EXPECT_EQ(facing.cn_facing, 96);
  EXPECT_NEAR(loop_all.read_us / none.read_us, 1.126, 0.02)
      << "+all_cross_channel: every cross-channel QP counts";
  EXPECT_DOUBLE_EQ(loop.read_us, none.read_us) << "default: loopback QPs do not";
  EXPECT_NEAR(facing.read_us / none.read_us, 1.126, 0.02) << "the calibration holds";
  EXPECT_EQ(Profile::ByName("cx5+cn_facing").Hash(), Profile::ByName("cx5").Hash())
      << "+cn_facing names the default";
}

TEST(OffloadReadings, LatencyOnlyLeavesTheProcessingUnitsFree) {
  const OffloadBed none = RunOffloadBed("cx5", 0, false);
  const OffloadBed pu = RunOffloadBed("cx5", 400, false);
  const OffloadBed lat = RunOffloadBed("cx5+latency_only", 400, false);
  EXPECT_DOUBLE_EQ(pu.read_us, lat.read_us) << "one READ alone: the same latency";
  EXPECT_GT(lat.read_us, none.read_us);
  // 128 READs in flight keep the 8 PUs busy: occupied by the penalty, they
  // serve fewer WRs per microsecond.
  EXPECT_GT(pu.burst_us, lat.burst_us * 1.2) << pu.burst_us << " vs " << lat.burst_us;
  EXPECT_GT(lat.burst_us, none.burst_us);
}

TEST(OffloadReadings, UnknownReadingIsNamed) {
  try {
    (void)Profile::ByName("cx5+sideways");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown reading 'sideways'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("+all_cross_channel"), std::string::npos);
  }
  EXPECT_EQ(Profile::ByName("cx5+all_cross_channel+latency_only").offload_occupies_pu, 0);
  EXPECT_NE(Profile::ByName("cx5+all_cross_channel").Hash(), Profile::ByName("cx5").Hash());
  EXPECT_NE(Profile::ByName("cx5+mn_poll").Hash(), Profile::ByName("cx5").Hash());
  auto wakeup_us = [](const Profile& p) {
    for (const auto& c : p.cpu_costs) {
      if (c.name == "mn.cq_wakeup") return c.us;
    }
    return -1.0;
  };
  EXPECT_GT(wakeup_us(Profile::ByName("cx5")), 0);
  EXPECT_EQ(wakeup_us(Profile::ByName("cx5+latency_only+mn_poll")), 0);
}

TEST(Determinism, SameSeedSameTraceAndBytes) {
  const auto a = RandomWorkload(7), b = RandomWorkload(7), c = RandomWorkload(8);
  EXPECT_EQ(a, b) << "reproduce with seed=7";
  EXPECT_NE(a.first, c.first) << "seed 8 should take another path";
}

}  // namespace
}  // namespace dmb::sim::testing
